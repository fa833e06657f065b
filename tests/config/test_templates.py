"""Templates and role placeholders (config/templates.py): `$ARGUMENTS`, `$1…$9`, `$$`; too few
or too many arguments said, naming how many it takes."""

from __future__ import annotations

from pathlib import Path

import pytest

from countbot_cli.config.roles import Role
from countbot_cli.config.templates import fill, role_with_arguments, split_arguments
from countbot_cli.errors import UsageError


def t(text: str) -> Role:
    return Role(name="review", file=Path("review.md"), text=text)


def test_placeholders_are_filled() -> None:
    assert (
        fill(t("Review $1 for $2; cost $$5"), ["a.py", "bugs"]) == "Review a.py for bugs; cost $5"
    )
    assert fill(t("Explain: $ARGUMENTS"), ["why", "is", "it"]) == "Explain: why is it"
    raw = ' x  "y" '  # the chat's text after /NAME: $ARGUMENTS keeps it as typed
    assert fill(t("Explain: $ARGUMENTS ($1)"), ["x", "y"], raw) == 'Explain: x  "y" (x)'
    assert fill(t("No placeholders"), []) == "No placeholders"
    assert fill(t("$$1 stays"), []) == "$1 stays"  # $$ is a literal dollar, never $1


def test_wrong_argument_counts_say_what_it_takes() -> None:
    with pytest.raises(UsageError, match=r"needs 2 arguments \(\$1 \$2\), got 1"):
        fill(t("Review $1 for $2"), ["a.py"])
    with pytest.raises(UsageError, match="takes no arguments"):
        fill(t("Plain text"), ["extra"])
    with pytest.raises(UsageError, match="takes 1 argument, got 2"):
        fill(t("Review $1"), ["a", "b"])


def test_chat_arguments_split_like_a_shell() -> None:
    assert split_arguments('a.py "two words"') == ["a.py", "two words"]
    with pytest.raises(UsageError, match="cannot read the arguments"):
        split_arguments('"unclosed')


def test_a_roles_placeholders_take_the_first_words() -> None:
    role, rest = role_with_arguments(t("Translate into $1."), ["French", "good", "morning"])
    assert role.text == "Translate into French." and rest == ["good", "morning"]
    role, rest = role_with_arguments(t("Plain role."), ["a", "question"])
    assert role.text == "Plain role." and rest == ["a", "question"]
    with pytest.raises(UsageError, match="role 'review' needs 1 argument"):
        role_with_arguments(t("Translate into $1."), [])
