"""The config as data: the typed schema Hydra composes into (schema), its dotted keys and the
closest key to a typo (keys), the one-line messages of a config that does not compose
(messages), and where the YAML lives (directory). Imports neither torch nor any other rn50 layer
but rn50.errors."""
