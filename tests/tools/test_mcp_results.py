"""What the model gets from an MCP tool's result: text passed on; images, audio and binary
resources (which an OpenAI-compatible `tool` message cannot carry) as a one-line note; text
resources with their URI; errors as failed results. Built from the SDK's own result types."""

from __future__ import annotations

import base64

import mcp_types as t

from countbot_cli.tools.mcp import result_to_tool_result, tool_name

PNG = base64.b64encode(b"\x89PNG" + b"\0" * 2044).decode()


def test_text_image_and_resources_become_text_with_notes() -> None:
    result = t.CallToolResult(
        content=[
            t.TextContent(text="Here is the chart."),
            t.ImageContent(data=PNG, mime_type="image/png"),
            t.AudioContent(data=base64.b64encode(b"x" * 10).decode(), mime_type="audio/wav"),
            t.EmbeddedResource(
                resource=t.TextResourceContents(
                    uri="file:///notes.md", mime_type="text/markdown", text="# Notes"
                )
            ),
            t.EmbeddedResource(
                resource=t.BlobResourceContents(
                    uri="file:///a.bin", mime_type="application/octet-stream", blob=PNG
                )
            ),
            t.ResourceLink(
                name="report", uri="https://example.com/r.pdf", mime_type="application/pdf"
            ),
        ]
    )
    res = result_to_tool_result(result, 10000)
    assert res.ok
    assert res.content.split("\n") == [
        "Here is the chart.",
        "[image from the tool: image/png, 2.0 KiB; not passed on: tool results reach the model "
        "as text only]",
        "[audio from the tool: audio/wav, 10 bytes; not passed on: tool results reach the model "
        "as text only]",
        "[resource file:///notes.md (text/markdown)]",
        "# Notes",
        "[resource file:///a.bin: application/octet-stream, 2.0 KiB of binary data; not passed on]",
        "[resource link: report https://example.com/r.pdf (application/pdf)]",
    ]


def test_an_error_result_fails_and_long_text_is_cut() -> None:
    failed = result_to_tool_result(
        t.CallToolResult(content=[t.TextContent(text="Invalid timezone")], is_error=True), 100
    )
    assert (failed.ok, failed.content) == (False, "Error: Invalid timezone")
    long = result_to_tool_result(t.CallToolResult(content=[t.TextContent(text="x" * 150)]), 100)
    assert long.content == "x" * 100 + "\n[… 50 more characters cut]"


def test_structured_only_and_empty_results() -> None:
    structured = t.CallToolResult(content=[], structured_content={"n": 1})
    assert result_to_tool_result(structured, 100).content == '{"n": 1}'
    assert result_to_tool_result(t.CallToolResult(content=[]), 100).content == (
        "(the tool returned nothing)"
    )


def test_tool_names_keep_to_what_a_function_name_may_hold() -> None:
    assert tool_name("time", "get_current_time") == "mcp__time__get_current_time"
    assert tool_name("web", "fetch.page/v2") == "mcp__web__fetch_page_v2"
