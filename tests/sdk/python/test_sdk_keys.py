"""Every key the SDK can send is understood or refused as unsupported, never unknown.

Walks the SDK's own request TypedDicts (agents, environments and sessions create/update, and
every event type of events.send) and, for each object they can contain, sends a request with
that object carrying every key its TypedDict allows. Mast must not answer `unknown_field`; and
the same request with one more key must be refused naming that key (so the object was really
reached and checked), unless an enclosing feature is refused as unsupported first.
"""

import typing
import uuid

import anthropic
import pytest
from typing_extensions import is_typeddict

from anthropic.types.beta import (
    agent_create_params,
    agent_update_params,
    environment_create_params,
    environment_update_params,
    session_create_params,
    session_update_params,
)
from anthropic.types.beta.sessions import event_send_params

HEADER_PARAMS = {"betas", "workspace_id"}
# Codes that refuse a whole feature once its object is read: budgets keep their upstream codes
# (the suite's scripted model has no list price; a session created without a budget gets none).
REFUSED = {"unsupported_feature", "model_not_budgetable", "budget_create_only"}
# Objects the SDK types allow but the API refuses from clients whatever they hold (upstream too).
CLIENT_REFUSED = {"BetaManagedAgentsRedactedBlockParam"}
# JSON Schema is open: a custom tool's `input_schema` keeps keys beyond those the SDK names.
OPEN_OBJECTS = {"BetaManagedAgentsCustomToolInputSchemaParam"}


def strip(t):
    """The type inside Required/NotRequired/Annotated."""
    while True:
        origin = typing.get_origin(t)
        if origin is typing.Annotated or getattr(origin, "__name__", "") in ("Required", "NotRequired"):
            t = typing.get_args(t)[0]
            continue
        if str(origin).endswith(("Required", "NotRequired")):
            t = typing.get_args(t)[0]
            continue
        return t


def hints(td):
    return {k: strip(v) for k, v in typing.get_type_hints(td, include_extras=True).items()}


def required_keys(td):
    """Keys marked `Required[...]` (or all but `NotRequired[...]` ones in a total TypedDict)."""
    out = set()
    for k, v in typing.get_type_hints(td, include_extras=True).items():
        names = set()
        while True:
            origin = typing.get_origin(v)
            if origin is None:
                break
            names.add(getattr(origin, "__name__", str(origin)))
            if origin is typing.Annotated or "Required" in str(origin):
                v = typing.get_args(v)[0]
                continue
            break
        if any("NotRequired" in n for n in names):
            continue
        if any(n.endswith("Required") for n in names) or getattr(td, "__total__", True):
            out.add(k)
    return out


def arms(t):
    """The alternatives of a union (or the type itself), without None."""
    t = strip(t)
    if typing.get_origin(t) is typing.Union or type(t).__name__ == "UnionType":
        return [strip(a) for a in typing.get_args(t) if a is not type(None)]
    return [t]


def list_item(t):
    origin = typing.get_origin(t)
    if origin is not None and getattr(origin, "__name__", "") in ("list", "List", "Iterable", "Sequence"):
        return strip(typing.get_args(t)[0])
    return None


def literal_of(td, key="type"):
    t = hints(td).get(key)
    if t is not None and typing.get_origin(t) is typing.Literal:
        return typing.get_args(t)[0]
    return None


def children(t):
    """(TypedDict, is_list) pairs reachable directly from a field of type `t`."""
    out = []
    for arm in arms(t):
        item = list_item(arm)
        if item is not None:
            out += [(td, True) for td in arms(item) if is_typeddict(td)]
        elif is_typeddict(arm):
            out.append((arm, False))
    return out


class Samples:
    def __init__(self, agent_id, env_id):
        self.agent_id = agent_id
        self.env_id = env_id

    def text(self, td, key):
        name = td.__name__
        if key == "name":
            if name.endswith("ToolConfigParams") and literal_of(td):
                return literal_of(td)
            if name.startswith("Environment"):
                return "env-" + uuid.uuid4().hex[:8]
            return "n" + uuid.uuid4().hex[:6]
        if key == "id":
            return "mast-scripted" if "ModelConfig" in name else self.agent_id
        return {
            "model": "mast-scripted",
            "agent": self.agent_id,
            "url": "https://example.com/x",
            "source": "https://example.com/x",
            "data": "AA==",
            "text": "hi",
            "environment_id": self.env_id,
            "role_arn": "arn:aws:iam::1:role/x",
            "skill_id": "xlsx",
            "tool_use_id": "sevt_missing",
            "custom_tool_use_id": "sevt_missing",
            "session_thread_id": "sthr_missing",
            "country": "US",
            "timezone": "UTC",
            "mount_path": "/workspace/x",
            "amount": "100",
            "currency": "USD",
        }.get(key, "x")

    def value(self, td, key, t, full):
        # Model ids are open strings that also list known names: send one Mast serves.
        if key in ("id", "model") and str in arms(t):
            return self.text(td, key)
        for arm in arms(t):
            if typing.get_origin(arm) is typing.Literal:
                return typing.get_args(arm)[0]
            if is_typeddict(arm):
                return self.instance(arm, full=False)
            item = list_item(arm)
            if item is not None:
                inner = arms(item)[0]
                if is_typeddict(inner):
                    return [self.instance(inner, full=False)] if full else []
                return [self.value(td, key, item, full)] if full else []
            if arm is str:
                return self.text(td, key)
            if arm is bool:
                return True
            if arm in (int, float):
                return 1
            if typing.get_origin(arm) in (dict, typing.Dict) or arm in (dict, object):
                return {"type": "object"} if key == "input_schema" else {}
        return "x"

    def instance(self, td, full, root=False):
        keys = hints(td)
        required = required_keys(td)
        wanted = keys if full else {k: v for k, v in keys.items() if k in required}
        if root:
            wanted = {k: v for k, v in wanted.items() if k not in HEADER_PARAMS}
        return {k: self.value(td, k, t, full) for k, t in wanted.items()}


def nodes(root):
    """Every (chain, TypedDict) reachable from `root`; a chain is a list of (key, is_list, td)."""
    out, seen = [], set()

    def walk(td, chain):
        out.append((chain, td))
        for key, t in hints(td).items():
            for child, is_list in children(t):
                mark = (td.__name__, key, child.__name__)
                if mark in seen:
                    continue
                seen.add(mark)
                walk(child, chain + [(key, is_list, child)])

    walk(root, [])
    return out


def build(samples, root, chain, extra=None):
    """A request body: minimal everywhere, full at the end of `chain` (plus `extra` keys)."""

    def inst(td, rest, is_root):
        if not rest:
            d = samples.instance(td, full=True, root=is_root)
            d.update(extra or {})
            return d
        d = samples.instance(td, full=False, root=is_root)
        key, is_list, child = rest[0]
        v = inst(child, rest[1:], False)
        d[key] = [v] if is_list else v
        return d

    return inst(root, chain, True)


def path_of(chain):
    return "".join(("." if i else "") + key + ("[0]" if is_list else "") for i, (key, is_list, _) in enumerate(chain))


def send(call, body):
    """The error code of the answer (None for a success or a code-less error)."""
    try:
        call(body)
        return None, None
    except anthropic.APIStatusError as e:
        return e.error_code, (e.body or {}).get("error", {}).get("details", {})


def test_every_sdk_key_is_understood_or_unsupported(client):
    agent = client.beta.agents.create(name="keys", model="mast-scripted")
    env = client.beta.environments.create(name="keys-" + uuid.uuid4().hex[:8])
    session = client.beta.sessions.create(agent=agent.id, environment_id=env.id)
    samples = Samples(agent.id, env.id)

    def create_env(b):
        return client.beta.environments.create(**b)

    def event(b):
        return client.beta.sessions.events.send(session.id, **b)

    roots = [
        (agent_create_params.AgentCreateParams, lambda b: client.beta.agents.create(**b)),
        (agent_update_params.AgentUpdateParams, lambda b: client.beta.agents.update(agent.id, **{k: v for k, v in b.items() if k != "version"})),
        (environment_create_params.EnvironmentCreateParams, create_env),
        (environment_update_params.EnvironmentUpdateParams, lambda b: client.beta.environments.update(env.id, **b)),
        (session_create_params.SessionCreateParams, lambda b: client.beta.sessions.create(**b)),
        (session_update_params.SessionUpdateParams, lambda b: client.beta.sessions.update(session.id, **b)),
        (event_send_params.EventSendParams, event),
    ]
    checked, unsupported = 0, []
    for root, call in roots:
        for chain, td in nodes(root):
            where = f"{root.__name__} {path_of(chain) or '(body)'} <{td.__name__}>"
            body = build(samples, root, chain)
            code, details = send(call, body)
            assert code != "unknown_field", f"{where}: the SDK's key {details.get('field')} is unknown to Mast"
            if td.__name__ in OPEN_OBJECTS or td.__name__ in CLIENT_REFUSED:
                unsupported.append(f"{where} (open or refused from clients)")
                continue
            # One key more must be refused by name: the object was reached and checked.
            if chain:
                code, details = send(call, build(samples, root, chain, {"zz_extra": 1}))
            else:
                code, details = send(lambda b: call({**b, "extra_body": {"zz_extra": 1}}), body)
            if code in REFUSED:
                what = details.get("feature", code)
                unsupported.append(f"{where} (refused: {what} at {details.get('field', '-')})")
                continue
            assert code == "unknown_field", f"{where}: an extra key was not refused ({code} {details})"
            assert details["field"].endswith("zz_extra"), f"{where}: {details}"
            checked += 1
    # The walk must have reached a real breadth of the API, not a handful of objects.
    assert checked >= 60, checked
    print(f"\n{checked} SDK objects checked key by key; under refused features: {len(unsupported)}")
    for u in unsupported:
        print("  " + u)
