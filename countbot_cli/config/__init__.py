"""Configuration (SPEC §3): Settings from defaults, the YAML file, the environment and flags."""
