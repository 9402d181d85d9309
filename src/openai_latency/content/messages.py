"""SDK request and response objects -> messages in the GenAI semantic conventions' schema
(``{"role": ..., "parts": [...]}``), for opt-in content capture (:mod:`.content`)."""

from __future__ import annotations

import json
from typing import Any

from ..read.attributes import param_field

JSON = dict[str, Any]


def text_part(content: str) -> JSON:
    return {"type": "text", "content": content}


def reasoning_text(message: Any) -> str | None:
    """The reasoning text of a chat message or delta: ``reasoning_content`` (DeepSeek, SGLang) or
    ``reasoning`` (vLLM, OpenRouter, Groq), extra fields of the SDK's models."""
    for name in ("reasoning_content", "reasoning"):
        text = getattr(message, name, None)
        if isinstance(text, str) and text:
            return text
    return None


def reasoning_part(content: str) -> JSON:
    return {"type": "reasoning", "content": content}


def make_message(role: str, parts: list[JSON], finish_reason: str | None = None) -> JSON:
    message: JSON = {"role": role, "parts": parts}
    if finish_reason is not None:
        message["finish_reason"] = finish_reason
    return message


def arguments(raw: Any) -> Any:
    """Tool call arguments as an object when they are JSON, else as sent."""
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def content_parts(content: Any) -> list[JSON]:
    """Message content (a string or a list of typed parts) -> semconv parts."""
    if content is None:
        return []
    if isinstance(content, str):
        return [text_part(content)]
    if not isinstance(content, (list, tuple)):
        return []
    parts: list[JSON] = []
    for part in content:
        kind = param_field(part, "type")
        if kind in ("text", "input_text", "output_text", "refusal"):
            parts.append(text_part(param_field(part, "text") or param_field(part, "refusal") or ""))
        elif kind == "image_url":
            parts.append(
                {
                    "type": "uri",
                    "modality": "image",
                    "uri": param_field(param_field(part, "image_url"), "url"),
                }
            )
        elif kind == "input_image" and param_field(part, "image_url"):
            parts.append({"type": "uri", "modality": "image", "uri": param_field(part, "image_url")})
        elif kind == "input_audio":
            audio = param_field(part, "input_audio")
            mime = f"audio/{param_field(audio, 'format')}"
            parts.append(
                {
                    "type": "blob",
                    "modality": "audio",
                    "mime_type": mime,
                    "content": param_field(audio, "data"),
                }
            )
        elif kind in ("file", "input_file") and (
            param_field(param_field(part, "file"), "file_id") or param_field(part, "file_id")
        ):
            file_id = param_field(param_field(part, "file"), "file_id") or param_field(part, "file_id")
            parts.append({"type": "file", "modality": "document", "file_id": file_id})
        else:
            parts.append({"type": str(kind)})
    return parts


def tool_call(call_id: Any, function: Any) -> JSON:
    args = arguments(param_field(function, "arguments"))
    return {"type": "tool_call", "id": call_id, "name": param_field(function, "name"), "arguments": args}


def chat_message(message: Any) -> JSON:
    role = str(param_field(message, "role") or "user")
    if role == "tool":
        response = {"type": "tool_call_response", "id": param_field(message, "tool_call_id")}
        content = param_field(message, "content")
        texts = [p["content"] for p in content_parts(content) if p.get("type") == "text"]
        response["response"] = "".join(texts) if texts else content
        return make_message(role, [response])
    parts = content_parts(param_field(message, "content"))
    for call in param_field(message, "tool_calls") or ():
        parts.append(tool_call(param_field(call, "id"), param_field(call, "function")))
    out = make_message(role, parts)
    name = param_field(message, "name")
    if isinstance(name, str):
        out["name"] = name
    return out


def choice_message(choice: Any, api_type: str | None) -> JSON:
    finish = getattr(choice, "finish_reason", None)
    if api_type == "completions":
        return make_message("assistant", [text_part(choice.text or "")], finish)
    message = getattr(choice, "message", None)
    reasoning = reasoning_text(message)
    parts = [reasoning_part(reasoning)] if reasoning else []
    parts.extend(content_parts(getattr(message, "content", None)))
    refusal = getattr(message, "refusal", None)
    if refusal:
        parts.append(text_part(refusal))
    for call in getattr(message, "tool_calls", None) or ():
        parts.append(tool_call(call.id, getattr(call, "function", None)))
    return make_message("assistant", parts, finish)


def responses_input(value: Any) -> list[JSON]:
    if isinstance(value, str):
        return [make_message("user", [text_part(value)])]
    if not isinstance(value, (list, tuple)):
        return []
    messages = []
    for item in value:
        kind = param_field(item, "type")
        if kind == "function_call":
            messages.append(make_message("assistant", [tool_call(param_field(item, "call_id"), item)]))
        elif kind == "function_call_output":
            part = {
                "type": "tool_call_response",
                "id": param_field(item, "call_id"),
                "response": param_field(item, "output"),
            }
            messages.append(make_message("tool", [part]))
        elif param_field(item, "role"):
            messages.append(
                make_message(str(param_field(item, "role")), content_parts(param_field(item, "content")))
            )
        else:
            messages.append(make_message("user", [{"type": str(kind)}]))
    return messages


def responses_output(response: Any) -> JSON:
    parts: list[JSON] = []
    for item in response.output:
        kind = getattr(item, "type", None)
        if kind == "message":
            parts.extend(
                content_parts([c.model_dump() if hasattr(c, "model_dump") else c for c in item.content])
            )
        elif kind == "function_call":
            parts.append(tool_call(item.call_id, item))
        elif kind == "reasoning":
            for summary in getattr(item, "summary", None) or ():
                parts.append(reasoning_part(getattr(summary, "text", "")))
        else:
            parts.append({"type": str(kind)})
    details = getattr(response, "incomplete_details", None)
    reason = getattr(details, "reason", None)
    finish = reason or ("tool_call" if any(p["type"] == "tool_call" for p in parts) else "stop")
    return make_message("assistant", parts, str(finish))


def tool_definitions(tools: Any) -> list[JSON]:
    """Chat tools (``{"type": "function", "function": {...}}``) and Responses tools (flat) -> flat."""
    if not isinstance(tools, (list, tuple)):
        return []
    out = []
    for tool in tools:
        kind = param_field(tool, "type")
        spec = (
            param_field(tool, kind) if isinstance(kind, str) and param_field(tool, kind) is not None else tool
        )
        definition: JSON = {"type": kind}
        for key in ("name", "description", "parameters"):
            value = param_field(spec, key)
            if value is not None:
                definition[key] = value
        out.append(definition)
    return out


REALTIME_TEXT_PARTS = frozenset({"input_text", "text", "output_text"})
REALTIME_AUDIO_PARTS = frozenset({"input_audio", "audio", "output_audio"})


def realtime_parts(content: Any, take: Any) -> list[JSON]:
    """A Realtime item's content parts -> semconv parts, each text through ``take`` (the capture's
    size budget). An audio part becomes its ``transcript`` as text when it has one, else a part that
    names its type only: audio (and image) bytes are never copied."""
    parts: list[JSON] = []
    for part in content if isinstance(content, (list, tuple)) else ():
        kind = str(param_field(part, "type"))
        text = None
        if kind in REALTIME_TEXT_PARTS:
            text = param_field(part, "text")
        elif kind in REALTIME_AUDIO_PARTS:
            text = param_field(part, "transcript")
        parts.append(text_part(take(text)) if isinstance(text, str) and text else {"type": kind})
    return parts


def realtime_item(item: Any, take: Any) -> JSON | None:
    """A Realtime conversation item (``conversation.item.create``'s ``item``, or an item of a
    ``response.create``'s ``input``) -> a message; None for an item reference or an unknown type."""
    kind = param_field(item, "type")
    if kind == "function_call":
        call = tool_call(param_field(item, "call_id"), {"name": param_field(item, "name")})
        call["arguments"] = arguments(take(param_field(item, "arguments")))
        return make_message("assistant", [call])
    if kind == "function_call_output":
        output = take(param_field(item, "output"))
        part = {"type": "tool_call_response", "id": param_field(item, "call_id"), "response": output}
        return make_message("tool", [part])
    if kind == "message":
        role = str(param_field(item, "role") or "user")
        return make_message(role, realtime_parts(param_field(item, "content"), take))
    return None
