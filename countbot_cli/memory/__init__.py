"""Long-term memory (SPEC §5): MEMORY.md, its search, overflow summaries, automatic memory,
recall, and the memory tool."""
