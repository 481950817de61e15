"""Task-augmented requests on the gateway's client session to an upstream, sent past the SDK.

The `mcp` 2.3 SDK defines the task types of the 2025-11-25 revision but sends none of them: its
`tools/call` insists on a `CallToolResult`, so a `CreateTaskResult` fails its check, and `tasks/*`
are no methods it knows. These requests go out as they are (stamped like any other, by
`gateway.upstreams.sdkclient.send_as_is`) and their answers come back unparsed, for the caller to
read as the protocol defines them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as types
from pydantic import ValidationError

from gateway.clients.tasks import RELATED_TASK
from gateway.errors import ProtocolError


def runs_tasks(capabilities: types.ServerCapabilities | None) -> bool:
    """Whether a server with `capabilities` runs `tools/call` as a task when asked."""
    tasks = capabilities.tasks if capabilities is not None else None
    requests = tasks.requests if tasks is not None else None
    return requests is not None and requests.tools is not None and requests.tools.call is not None


def task_call(name: str, arguments: Mapping[str, Any], metadata: types.TaskMetadata) -> types.CallToolRequest:
    """The `tools/call` request that asks the server to run `name` as a task."""
    params = types.CallToolRequestParams(name=name, arguments=dict(arguments), task=metadata)
    return types.CallToolRequest(params=params)


def created_task(server: str, answer: Mapping[str, Any]) -> types.Task:
    """The task a server says it created in answer to a task-augmented call."""
    try:
        return types.CreateTaskResult.model_validate(answer, by_name=False).task
    except ValidationError:
        raise ProtocolError(f"Server '{server}' did not answer a task-augmented call with a task") from None


def result_request(task_id: str) -> types.GetTaskPayloadRequest:
    """The `tasks/result` request for the server's task `task_id`: answered once the task ends."""
    return types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id))


def cancel_request(task_id: str) -> types.CancelTaskRequest:
    """The `tasks/cancel` request for the server's task `task_id`."""
    return types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id))


def task_result(server: str, answer: Mapping[str, Any]) -> types.CallToolResult:
    """The result of a task a server ran for a plain call: the call's result, without the `_meta`
    that names the server's task (the caller knows of no task)."""
    try:
        result = types.CallToolResult.model_validate(answer, by_name=False)
    except ValidationError:
        raise ProtocolError(f"Server '{server}' did not answer tasks/result with a tool result") from None
    meta = {key: value for key, value in (result.meta or {}).items() if key != RELATED_TASK}
    return result.model_copy(update={"meta": meta or None})
