"""The interactive chat (SPEC §2): input, slash commands, the live view and the toolbar."""
