"""The protocols: one module per protocol (its numbers, block, comparison and page) and one declaration each, in
:mod:`gece.protocols.declarations`."""
