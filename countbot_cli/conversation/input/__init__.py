"""The user's input (SPEC §1, §4): the prompt of `ask` (words, stdin, `-f` files), `-a`
attachments (files, images, URLs fetched through a guarded connection). Below the turn: nothing
here imports the rest of `conversation/` except the session value."""
