"""The config as data: the typed schema Hydra composes into (schema), what is read off it and a
resolved config typed again (reads), its dotted keys and the closest key to a typo (keys), the
one-line messages of a config that does not compose (messages), the compile keys' rules
(compilation), and where the YAML lives (directory). Imports no rn50 package but rn50.errors."""
