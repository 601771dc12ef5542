"""One construct per concern; stacks in :mod:`asyncz_cdk.stacks` only compose them."""
