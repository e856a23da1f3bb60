"""Stage 2, match: takes one token of a bound target and golden and gives its `Pair`s (target tensor, golden
tensor, how they were paired) and its `Unmatched` items with the reason: GE → FX through torchair's rules (`fx`),
GE → fusion-off GE by op name (`token`), fused ops through their members, GE-inserted casts against their input."""
