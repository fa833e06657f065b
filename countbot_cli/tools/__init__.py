"""Tools the model may call (SPEC §6): the registry (tools/registry.py), the tools themselves,
their confinement and the approval policy. Nothing is imported here, so a turn without tools
loads only what it uses (tools/approval.py for the policy)."""
