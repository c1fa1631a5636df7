"""A client of sparecap's REST API, built at run time from its OpenAPI
document (``GET /v1/openapi.json``, or ``api/openapi.json`` in the
repository).

Every operation of the document is a method named by its ``operationId``
(``createCluster``) and by the same name in snake_case (``create_cluster``).
Path and query parameters are keyword arguments, the JSON request body is
``body=``::

    c = Client("http://127.0.0.1:8407", token)
    cluster = c.createCluster(body={"cluster_name": "a", ...})
    c.getCluster(id=cluster["cluster_id"])
    c.getUsage(from_="2026-12-01T00:00:00Z", to="2027-01-01T00:00:00Z", format="csv")

A parameter whose name is a Python keyword (``from``) is also taken with a
trailing underscore (``from_``). Calls are checked against the document
before anything is sent: a missing required parameter, an unknown one, a
value of the wrong type or outside an enum, or a body the operation does
not take raises :class:`ParameterError`. An error answer raises
:class:`APIError`. A JSON answer is returned decoded, a CSV one as text, an
event stream (``listEvents(..., watch=True)``) as an :class:`EventStream`
of :class:`StreamEvent`.
"""

import datetime as _dt
import json
import keyword
import math
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional

__all__ = [
    "APIError",
    "Client",
    "EventStream",
    "Operation",
    "ParameterError",
    "ResponseError",
    "StreamEvent",
    "load_operations",
    "snake_case",
]

DEFAULT_MAX_BODY = 32 << 20
# The document is read once, whatever max_body the answers are held to.
MAX_DOCUMENT = 32 << 20
# An error answer is under 1 KB (docs/api.md, Errors); 1 MiB also covers a
# proxy's HTML page without letting one exhaust memory.
MAX_ERROR_BODY = 1 << 20
# The Go client's bound on one server-sent event.
MAX_EVENT = 1 << 20

_METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
_CODE_FOR_STATUS = {
    400: "invalid_argument",
    401: "unauthenticated",
    403: "permission_denied",
    404: "not_found",
    409: "conflict",
    500: "internal",
}


class APIError(Exception):
    """A non-2xx answer. ``code`` is the error's stable code
    (``invalid_argument``, ``not_found``, …), derived from the status when
    the body was not the API's error shape; ``field`` names the request
    field at fault, or is ``None``."""

    def __init__(self, status: int, code: str, message: str, field: Optional[str] = None):
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        text = "%d %s: %s" % (status, code, message)
        if field and field not in message:
            text += " (field %s)" % field
        # The message may quote what someone typed; keep it one printable line.
        super().__init__(text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text)


class ParameterError(TypeError):
    """A call the document does not allow, refused before it was sent."""


class ResponseError(Exception):
    """A 2xx answer the client cannot read: too large, not valid JSON, or of
    a media type it does not know."""


@dataclass(frozen=True)
class StreamEvent:
    """One server-sent event: ``id`` (a cursor to resume from), ``event``
    (its type, ``node_lifecycle_event``) and ``data`` decoded from JSON."""

    id: str
    event: str
    data: Any


@dataclass(frozen=True)
class Operation:
    """One operation of the document."""

    operation_id: str
    method: str
    path: str
    path_params: Dict[str, dict]
    query_params: Dict[str, dict]
    required_query: frozenset
    body: Optional[str]  # None: takes no body; "required" or "optional"
    authenticated: bool
    summary: str


def snake_case(name: str) -> str:
    """``whoAmI`` -> ``who_am_i``, ``getOpenAPI`` -> ``get_open_api``."""
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


def _resolve(doc: dict, obj: Any, where: str) -> Any:
    seen = 0
    while isinstance(obj, dict) and "$ref" in obj:
        ref = obj["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise ValueError("%s: only references within the document are supported, not %r" % (where, ref))
        target: Any = doc
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                raise ValueError("%s: reference %r points at nothing" % (where, ref))
            target = target[part]
        obj = target
        seen += 1
        if seen > 32:
            raise ValueError("%s: reference %r loops" % (where, ref))
    return obj


def load_operations(doc: Any) -> Dict[str, Operation]:
    """The operations of an OpenAPI 3 document (a decoded dict), by
    operationId. Raises ValueError on a document it cannot use."""
    if not isinstance(doc, dict) or not isinstance(doc.get("paths"), dict):
        raise ValueError("not an OpenAPI document: no paths object")
    version = doc.get("openapi")
    if not isinstance(version, str) or not version.startswith("3."):
        raise ValueError("not an OpenAPI 3 document (openapi: %r)" % (version,))
    default_auth = bool(doc.get("security"))
    ops: Dict[str, Operation] = {}
    for path, item in doc["paths"].items():
        item = _resolve(doc, item, path)
        if not isinstance(item, dict):
            raise ValueError("%s: path item is not an object" % path)
        shared = item.get("parameters", [])
        for method in _METHODS:
            op = item.get(method)
            if op is None:
                continue
            where = "%s %s" % (method.upper(), path)
            op_id = op.get("operationId")
            if not isinstance(op_id, str) or not op_id:
                raise ValueError("%s has no operationId" % where)
            if op_id in ops:
                raise ValueError("operationId %r names two operations" % op_id)
            params: Dict[tuple, dict] = {}
            # Operation parameters override the path item's of the same name and place.
            for p in list(shared) + list(op.get("parameters", [])):
                p = _resolve(doc, p, where)
                if not isinstance(p, dict) or "name" not in p or "in" not in p:
                    raise ValueError("%s: a parameter lacks name or in" % where)
                params[(p["name"], p["in"])] = p
            path_params = {n: p for (n, loc), p in params.items() if loc == "path"}
            query_params = {n: p for (n, loc), p in params.items() if loc == "query"}
            in_template = set(re.findall(r"{([^}]+)}", path))
            if in_template != set(path_params):
                raise ValueError("%s: path parameters %s do not match the path" % (where, sorted(path_params)))
            body = None
            rb = op.get("requestBody")
            if rb is not None:
                rb = _resolve(doc, rb, where)
                body = "required" if rb.get("required") else "optional"
            security = op.get("security")
            ops[op_id] = Operation(
                operation_id=op_id,
                method=method.upper(),
                path=path,
                path_params=path_params,
                query_params=query_params,
                required_query=frozenset(n for n, p in query_params.items() if p.get("required")),
                body=body,
                authenticated=default_auth if security is None else bool(security),
                summary=str(op.get("summary", "")),
            )
    return ops


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # The API never redirects; following one would send the token elsewhere.
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


class EventStream:
    """The events of a ``text/event-stream`` answer, as they arrive. Iterate
    it; close it (or use ``with``) to end the stream. Comments (the
    server's keep-alives) are skipped; an event's data over 1 MiB raises
    :class:`ResponseError`."""

    def __init__(self, resp):
        self._resp = resp

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._resp.close()

    def __iter__(self) -> Iterator[StreamEvent]:
        ev_id, ev_type, data, size = "", "", [], 0
        while True:
            raw = self._resp.readline(MAX_EVENT + 1)
            if not raw:
                return
            if len(raw) > MAX_EVENT:
                raise ResponseError("server-sent event line over %d bytes" % MAX_EVENT)
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                raise ResponseError("server-sent event line is not UTF-8") from None
            if line == "":
                if data:
                    text = "\n".join(data)
                    try:
                        value = json.loads(text)
                    except ValueError as e:
                        raise ResponseError("server-sent event %s: data is not JSON: %s" % (ev_id or "?", e)) from None
                    yield StreamEvent(id=ev_id, event=ev_type or "message", data=value)
                ev_type, data, size = "", [], 0
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if name == "data":
                size += len(value)
                if size > MAX_EVENT:
                    raise ResponseError("server-sent event over %d bytes" % MAX_EVENT)
                data.append(value)
            elif name == "id":
                ev_id = value
            elif name == "event":
                ev_type = value


class Client:
    """A client of the sparecap API at ``base_url`` that authenticates with
    ``token`` (an empty token sends none).

    ``document`` is the OpenAPI document to build the methods from: None
    (the default) fetches it from the server's ``/v1/openapi.json``; a
    string or path reads a file; a dict is used as it is (share
    ``client.document`` between clients to fetch it once). ``timeout`` is
    in seconds per socket operation: over 15 s for event streams, whose
    keep-alives come every 15 s. ``max_body`` bounds the bytes read of an
    answer.

    An operation whose name, or snake_case alias, would shadow one of the
    client's own attributes is reachable through :meth:`call` only.
    """

    def __init__(
        self,
        base_url: str,
        token: str = "",
        document: Any = None,
        timeout: float = 30.0,
        max_body: int = DEFAULT_MAX_BODY,
        user_agent: str = "sparecap-python-client",
    ):
        u = urllib.parse.urlsplit(base_url or "")
        if u.scheme not in ("http", "https") or not u.netloc:
            raise ValueError("base_url must be an http:// or https:// URL, not %r" % (base_url,))
        if u.query or u.fragment:
            raise ValueError("base_url must not carry a query or fragment: %r" % (base_url,))
        if not isinstance(token, str) or any(ch in token for ch in "\r\n\0"):
            raise ValueError("token must be a string without line breaks")
        if not (isinstance(max_body, int) and max_body > 0):
            raise ValueError("max_body must be a positive number of bytes, not %r" % (max_body,))
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.max_body = max_body
        self.user_agent = user_agent
        self._opener = urllib.request.build_opener(_NoRedirect)
        if document is None:
            document = self._fetch_document()
        elif isinstance(document, (str, os.PathLike)):
            with open(document, "rb") as f:
                raw = f.read(MAX_DOCUMENT + 1)
            if len(raw) > MAX_DOCUMENT:
                raise ValueError("%s: document over %d bytes" % (document, MAX_DOCUMENT))
            try:
                document = json.loads(raw)
            except ValueError as e:
                raise ValueError("%s: not JSON: %s" % (document, e)) from None
        elif not isinstance(document, dict):
            raise ValueError("document must be None, a file path or a dict, not %s" % type(document).__name__)
        self.document = document
        self.operations = load_operations(document)
        own = set(dir(type(self))) | set(vars(self))
        for op in self.operations.values():
            fn = self._method(op)
            for name in dict.fromkeys((op.operation_id, snake_case(op.operation_id))):
                if name.isidentifier() and name not in own:
                    setattr(self, name, fn)

    def _fetch_document(self) -> dict:
        try:
            doc = self._send("GET", "/v1/openapi.json", None, None, authenticated=False, limit=MAX_DOCUMENT)
        except APIError as e:
            raise ValueError("cannot load the API's document from %s/v1/openapi.json: %s" % (self.base_url, e)) from None
        if not isinstance(doc, dict):
            raise ValueError("%s/v1/openapi.json is not an OpenAPI document" % self.base_url)
        return doc

    def _method(self, op: Operation):
        def method(body: Any = None, **params: Any) -> Any:
            return self.call(op.operation_id, body=body, **params)

        method.__name__ = op.operation_id
        lines = ["%s %s: %s" % (op.method, op.path, op.summary)]
        if op.path_params:
            lines.append("Path: " + ", ".join(op.path_params))
        if op.query_params:
            lines.append("Query: " + ", ".join(n + ("*" if n in op.required_query else "") for n in op.query_params))
        if op.body:
            lines.append("Body: %s (body=)" % op.body)
        method.__doc__ = "\n".join(lines)
        return method

    def call(self, operation_id: str, body: Any = None, **params: Any) -> Any:
        """Call the operation ``operation_id`` (or its snake_case alias)."""
        op = self.operations.get(operation_id)
        if op is None:
            op = next((o for o in self.operations.values() if snake_case(o.operation_id) == operation_id), None)
        if op is None:
            raise ParameterError("no operation %r in the API's document" % (operation_id,))
        path, query = self._bind(op, params)
        if body is not None and op.body is None:
            raise ParameterError("%s takes no body" % op.operation_id)
        if body is None and op.body == "required":
            raise ParameterError("%s needs a JSON body (body={...})" % op.operation_id)
        if body is not None and not isinstance(body, dict):
            raise ParameterError("%s: body must be a dict (one JSON object), not %s" % (op.operation_id, type(body).__name__))
        return self._send(op.method, path, query, body, authenticated=op.authenticated, name=op.operation_id)

    def _bind(self, op: Operation, params: Dict[str, Any]):
        given: Dict[str, Any] = {}
        seen = set()
        for key, value in params.items():
            name = key
            if key not in op.path_params and key not in op.query_params and key.endswith("_") and keyword.iskeyword(key[:-1]):
                name = key[:-1]
            if name not in op.path_params and name not in op.query_params:
                known = sorted(set(op.path_params) | set(op.query_params))
                raise ParameterError(
                    "%s has no parameter %r; it takes %s"
                    % (op.operation_id, key, ", ".join(known) if known else "none (the body goes in body=)")
                )
            if name in seen:
                raise ParameterError("%s: parameter %r given twice (as %r too)" % (op.operation_id, name, name + "_"))
            seen.add(name)
            # None is "not given", so optional arguments can be passed through.
            if value is not None:
                given[name] = value
        missing = [n for n in op.path_params if n not in given] + sorted(op.required_query - set(given))
        if missing:
            raise ParameterError("%s needs %s" % (op.operation_id, ", ".join(_arg_name(m) for m in missing)))
        path = op.path
        for name in op.path_params:
            value = given[name]
            if not isinstance(value, str) or value in ("", ".", ".."):
                raise ParameterError("%s: path parameter %r must be a non-empty string, not %r" % (op.operation_id, name, value))
            path = path.replace("{%s}" % name, urllib.parse.quote(value, safe=""))
        query = [(n, _query_value(op, n, op.query_params[n], given[n])) for n in op.query_params if n in given]
        return path, query

    def _send(self, method: str, path: str, query, body, authenticated: bool, name: str = "", limit: int = 0) -> Any:
        limit = limit or self.max_body
        url = self.base_url + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None
        headers = {"Accept": "application/json", "User-Agent": self.user_agent}
        if body is not None:
            try:
                data = json.dumps(body, allow_nan=False).encode("utf-8")
            except (TypeError, ValueError) as e:
                raise ParameterError("%s: body is not JSON: %s" % (name or path, e)) from None
            headers["Content-Type"] = "application/json"
        if authenticated and self.token:
            headers["Authorization"] = "Bearer " + self.token
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            resp = self._opener.open(req, timeout=self.timeout)
        except urllib.error.HTTPError as e:
            try:
                raw = e.read(MAX_ERROR_BODY)
            finally:
                e.close()
            raise _api_error(e.code, raw) from None
        ctype = resp.headers.get_content_type()
        if ctype == "text/event-stream":
            return EventStream(resp)
        with resp:
            raw = resp.read(limit + 1)
        if len(raw) > limit:
            raise ResponseError("%s %s: answer over %d bytes (raise max_body)" % (method, path, limit))
        if resp.status == 204:
            return None
        if ctype == "application/json" or ctype.endswith("+json"):
            try:
                return json.loads(raw)
            except ValueError as e:
                raise ResponseError("%s %s: answer is not JSON: %s" % (method, path, e)) from None
        if ctype.startswith("text/"):
            return raw.decode(resp.headers.get_content_charset() or "utf-8")
        raise ResponseError("%s %s: answer of unknown media type %r" % (method, path, ctype))


def _arg_name(name: str) -> str:
    return "%r (%s_=)" % (name, name) if keyword.iskeyword(name) else repr(name)


def _api_error(status: int, raw: bytes) -> APIError:
    code = message = field = None
    try:
        err = json.loads(raw)["error"]
        code, message, field = err.get("code"), err.get("message"), err.get("field")
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    if not message:
        message = raw.decode("utf-8", "replace").strip()
        if len(message) > 200:
            message = message[:200] + "…"
        message = message or "HTTP %d" % status
    return APIError(status, code or _CODE_FOR_STATUS.get(status, "http_%d" % status), message, field or None)


def _query_value(op: Operation, name: str, param: dict, value: Any) -> str:
    schema = param.get("schema") or {}
    kind = schema.get("type", "string")
    where = "%s: query parameter %r" % (op.operation_id, name)
    if kind == "boolean":
        if not isinstance(value, bool):
            raise ParameterError("%s must be True or False, not %r" % (where, value))
        return "true" if value else "false"
    if kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ParameterError("%s must be an int, not %r" % (where, value))
        text = str(value)
    elif kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ParameterError("%s must be a finite number, not %r" % (where, value))
        text = repr(value)
    elif kind == "string":
        if isinstance(value, _dt.datetime) and schema.get("format") == "date-time":
            if value.tzinfo is None:
                raise ParameterError("%s: a datetime needs a time zone (tzinfo)" % where)
            text = value.isoformat()
        elif isinstance(value, str):
            text = value
        else:
            raise ParameterError("%s must be a str, not %r" % (where, value))
    else:
        raise ParameterError("%s has type %r, which this client cannot send" % (where, kind))
    enum = schema.get("enum")
    if enum and text not in [str(e) for e in enum]:
        raise ParameterError("%s must be one of %s, not %r" % (where, ", ".join(str(e) for e in enum), value))
    return text
