"""One construct per concern; the stacks (:mod:`asyncz_cdk.data_stack`,
:mod:`asyncz_cdk.service_stack`) only compose them."""
