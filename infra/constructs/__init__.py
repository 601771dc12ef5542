"""One construct per concern; stacks in :mod:`infra.stacks` only compose them."""
