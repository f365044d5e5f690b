"""The config as data: the typed schema Hydra composes into (schema), a resolved config typed again
(typed), its dotted keys and the closest key to a typo (keys), the one-line messages of a config
that does not compose (messages), the compile keys' rules (compilation), and where the YAML lives
(directory). Imports no rn50 package but rn50.errors."""
