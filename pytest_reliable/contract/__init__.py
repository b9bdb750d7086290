"""What a user names, numpy-free (the lowest layer above the foundation and the space).

In order: `vocabulary` (the SPEC's words, typed: policies, modes, groupings, threshold names and
directions), `thresholds` (the threshold table: how each ``@reliable`` threshold is decided, read
by the gate and by early stopping), `settings` (one run's ``--reliable-*`` options, validated),
`markers` (the marker arguments: names, types, defaults, validation into frozen specs),
`hookspec` (the two hooks a ``conftest.py`` may implement). Nothing here imports numpy, the
engine or pytest.
"""
