"""Test helpers shared by the tiers (the contract suite of the store and broker ports)."""
