"""A Python client for vtrain-server (the vtrain.v1 API), for schedulers and scripts.

The stubs (vtrain/v1/vtrain_pb2.py, vtrain_pb2_grpc.py, job_pb2.py, profiles_pb2.py) are
generated from proto/ at build time into build/client/python/gen with Debian's
protoc and grpc_python_plugin; put that directory on sys.path (the example
scheduler_example.py does).

Requests are dicts in the protobuf JSON form of the vtrain.v1 request message,
exactly what ``vtrainctl predict -f FILE`` reads: field names in snake_case
(``"tensor_parallel"``) or lowerCamel (``"tensorParallel"``), enums by name
(``"DTYPE_FP8"``), 64-bit integers as numbers or strings. Responses are dicts
in the form ``vtrainctl ... --json`` prints: snake_case keys, every scalar
field present (defaults included), enums by name, 64-bit integers as ints,
unset sub-messages left out.

    from vtrain_client import VtrainClient, VtrainError

    with VtrainClient("127.0.0.1:50051") as client:
        r = client.predict({"model": {"preset": "gpt3-13b"},
                            "cluster": {"gpu": "a100-sxm4-80gb", "num_gpus": 16},
                            "plan": {"tensor_parallel": 8, "pipeline_parallel": 2,
                                     "global_batch": 512, "dtype": "DTYPE_BF16"}})
        print(r["iteration_time_ms"], r["memory"]["fits"])
        best = client.search({"model": {"preset": "gpt3-13b"}, "gpus": 16,
                              "global_batch": 512})["best"]

A key the message does not have, or an enum value it does not name, raises
VtrainError (code INVALID_ARGUMENT) naming it before anything is sent; errors
from the server raise VtrainError with the server's gRPC code and message.
"""

import inspect

import grpc
from google.protobuf import descriptor as _descriptor
from google.protobuf import json_format

from vtrain.v1 import cluster_sim_pb2
from vtrain.v1 import presets_pb2
from vtrain.v1 import job_pb2
from vtrain.v1 import vtrain_pb2
from vtrain.v1 import vtrain_pb2_grpc

_FD = _descriptor.FieldDescriptor

_POLICIES = {
    "best": "CURVE_POLICY_BEST",
    "data-parallel": "CURVE_POLICY_DATA_PARALLEL",
}

# Field types protobuf's JSON mapping writes as strings and vtrainctl's
# printer (proto/json.cc) writes as numbers.
_INT64_TYPES = frozenset({_FD.TYPE_INT64, _FD.TYPE_UINT64, _FD.TYPE_SINT64,
                          _FD.TYPE_FIXED64, _FD.TYPE_SFIXED64})

# vtrainctl prints every field without presence, defaults included; the
# option's name changed in protobuf 26.
_PRINT_DEFAULTS = (
    {"always_print_fields_with_no_presence": True}
    if "always_print_fields_with_no_presence" in inspect.signature(
        json_format.MessageToDict).parameters
    else {"including_default_value_fields": True})


class VtrainError(Exception):
    """A call failed.

    `code` is a grpc.StatusCode: the server's for an error it returned,
    INVALID_ARGUMENT for a request the client refused before sending it
    (not a dict, an unknown key, an enum value the API does not name, a value
    of the wrong type). The message names the field.
    """

    def __init__(self, code, message):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.details = message


class VtrainClient:
    """Calls one vtrain-server.

    address: "HOST:PORT".
    token: sent as "authorization: Bearer TOKEN" when given (the server's
        --push-token-file token; reads need it only under
        --require-auth-for-reads).
    ca_file: a PEM file of the CA that signed the server's certificate;
        selects TLS (plaintext without it).
    timeout_s: the deadline of each call, a whole streamed search included.
    client_name: how the server tells this program from others when it
        shares its simulation slots (x-vtrain-client metadata, at most 64
        printable characters; docs/deployment.md); default: by token or
        address.

    Nothing connects until the first call.

    Usable as a context manager; close() releases the channel.
    """

    def __init__(self, address, token=None, ca_file=None, timeout_s=60.0, client_name=None):
        if ca_file:
            with open(ca_file, "rb") as f:
                creds = grpc.ssl_channel_credentials(root_certificates=f.read())
            self._channel = grpc.secure_channel(address, creds)
        else:
            self._channel = grpc.insecure_channel(address)
        self._simulator = vtrain_pb2_grpc.SimulatorStub(self._channel)
        self._registry = vtrain_pb2_grpc.ProfileRegistryStub(self._channel)
        self._metadata = [("authorization", f"Bearer {token}")] if token else []
        if client_name:
            self._metadata.append(("x-vtrain-client", client_name))
        self._timeout_s = timeout_s

    def close(self):
        """Closes the channel; the client cannot be used after."""
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # The four Simulator calls.

    def predict(self, request):
        """One prediction: `request` is a PredictRequest dict, e.g.

            {"model": {"preset": "gpt3-13b"},
             "cluster": {"gpu": "a100-sxm4-80gb", "num_gpus": 16},
             "plan": {"tensor_parallel": 8, "pipeline_parallel": 2, "global_batch": 512}}

        Returns the PredictResponse dict ("iteration_time_ms", "mfu",
        "memory", "stages", the job as simulated in "model"/"plan"/"cluster",
        "settings", ...), as `vtrainctl predict --json` prints it. The request
        may carry a Megatron-LM launch script as text ("megatron_args") or a
        Megatron-Bridge ConfigContainer YAML dump ("megatron_bridge_config"),
        and a measured step time ("measured_ms", then "explanation" answers why it
        differs: see explain).
        """
        message = _parse(request, vtrain_pb2.PredictRequest)
        return _to_dict(self._unary(self._simulator.Predict, message))

    def explain(self, request, measured_ms):
        """Why a run's measured step time (ms) differs from the prediction of
        `request` (a PredictRequest dict): the PredictResponse dict with its
        "explanation" (where the measurement falls in the 90% interval, and
        the single setting changes that move the prediction toward it,
        closest first), as `vtrainctl explain --json` prints it.
        """
        return self.predict(dict(request, measured_ms=measured_ms))

    def search(self, request, progress=None):
        """A plan search: `request` is a SearchRequest dict, e.g.

            {"model": {"preset": "gpt3-13b"}, "cluster": {"gpu": "a100-sxm4-80gb"},
             "gpus": 16, "global_batch": 512, "objective": "OBJECTIVE_TIME"}

        Returns the SearchResult dict ("best", "fastest", "pareto", "considered",
        ...), as `vtrainctl search --json` prints it. `progress`, when given, is
        called as progress(evaluated, total) for each progress message the
        server streams before the result.
        """
        message = _parse(request, vtrain_pb2.SearchRequest)
        return self._streamed_result(self._simulator.Search, message, progress)

    def curve(self, request):
        """Throughput curves: `request` is a ThroughputCurveRequest dict, e.g.

            {"jobs": [{"name": "13b", "model": {"preset": "gpt3-13b"}, "global_batch": 512}],
             "gpu_counts": [8, 16, 32], "policy": "CURVE_POLICY_BEST"}

        Returns the ThroughputCurveResponse dict: "curves" (one per job, in
        request order, each with "name" and "points": {"gpus", "fits", "plan",
        "iterations_per_s", ...}) and "policy", as `vtrainctl curve --json`
        prints it.
        """
        message = _parse(request, vtrain_pb2.ThroughputCurveRequest)
        return _to_dict(self._unary(self._simulator.ThroughputCurve, message))

    def presets(self):
        """The model presets and GPU models the server's build knows.

        Returns the PresetsResponse dict: "models" (each with "name", "arch",
        "parameters", "active_parameters", the shape) and "gpus" (each with
        "name", its "datasheet" figures, "mx_block_scaling", "calibration"),
        as `vtrainctl presets --json` prints it.
        """
        message = presets_pb2.PresetsRequest()
        return _to_dict(self._unary(self._simulator.Presets, message))

    def cluster_sim(self, request):
        """The scheduling study: `request` is a ClusterSimRequest dict, e.g.

            {"gpus": 64, "jobs": [{"id": "a", "submit_s": 0, "deadline_s": 7200,
                                   "duration_s": 1800, "num_gpus": 8}]}

        Returns the ClusterSimResponse dict: "outcomes", one per policy
        ("elasticflow", "vtrain"), each with its deadline satisfaction, JCTs,
        utilisation and per-job outcomes. A whole study is one request too:

            {"gpus": 1024, "study": {"trace": [...rows as above...],
                                     "windows": [{"hours": 400, "seeds": [1, 2, 3]}],
                                     "target_loads": [1.0], "job_mixes": ["JOB_MIX_PAPER"]}}

        answered with "windows" (one per window, its policies' outcomes) and
        "summaries" (per mix, size, load and window over the seeds), as
        `vtrainctl cluster-sim --json` prints it.
        """
        message = _parse(request, cluster_sim_pb2.ClusterSimRequest)
        return _to_dict(self._unary(self._simulator.ClusterSim, message))

    def plan_model(self, request, progress=None):
        """The compute-optimal model for a budget: `request` is a
        PlanModelRequest dict, e.g.

            {"cluster": {"gpu": "a100-sxm4-80gb"}, "gpus": 64, "days": 7}

        Returns the PlanModelResult dict ("optimal", "naive", "candidates",
        ...), as `vtrainctl plan-model --json` prints it. `progress`, when
        given, is called as progress(planned, total) as candidates are planned.
        """
        message = _parse(request, vtrain_pb2.PlanModelRequest)
        return self._streamed_result(self._simulator.PlanModel, message, progress)

    def profiles(self, gpu=None):
        """The server's profile sets, oldest first: a list of ProfileSetSummary
        dicts ("id", "name", "gpu", "created_at", "num_operators",
        "num_collectives", "builtin"), the "profile_sets" of
        `vtrainctl profiles ls --json`. `gpu` keeps only that GPU's sets.
        """
        request = vtrain_pb2.ListProfileSetsRequest(gpu=gpu or "")
        response = self._unary(self._registry.ListProfileSets, request)
        return _to_dict(response)["profile_sets"]

    # The former interface, kept for existing callers.

    def throughput_curves(self, jobs, gpu_counts=None, max_gpus=0, step=0, policy="best",
                          monotone=False):
        """One curve per job: [{"name", "points": [{"gpus", "fits", "plan", ...}]}].

        The older, flat interface; curve() takes the whole ThroughputCurveRequest.
        A job is a dict with "preset" (or "num_layers", "hidden_size",
        "num_heads", "seq_len" and the other ModelSpec fields), "global_batch",
        and optionally "name", "gpu", "gpus_per_node" and "dtype" (an enum name
        such as "DTYPE_BF16", or "fp16", "bf16", "fp8"). policy is "best" or
        "data-parallel". A point that fits has "plan" ({"t", "d", "p",
        "micro_batch"}), "plan_gpus", "iteration_time_ms", "iterations_per_s",
        "samples_per_s" and "tokens_per_s". An unknown key raises VtrainError.
        """
        if policy not in _POLICIES:
            raise VtrainError(grpc.StatusCode.INVALID_ARGUMENT,
                              f"policy: {policy!r} is not one of {sorted(_POLICIES)}")
        request = {"jobs": [_curve_job(i, job) for i, job in enumerate(jobs)],
                   "gpu_counts": list(gpu_counts or []), "max_gpus": max_gpus, "step": step,
                   "policy": _POLICIES[policy], "monotone": monotone}
        return [_legacy_curve(c) for c in self.curve(request)["curves"]]

    # Calls.

    def _unary(self, method, message):
        try:
            return method(message, timeout=self._timeout_s, metadata=self._metadata)
        except grpc.RpcError as e:
            raise VtrainError(e.code(), e.details()) from None

    def _streamed_result(self, method, message, progress):
        """Reads a stream of {progress | result} messages; returns the result."""
        try:
            for response in method(message, timeout=self._timeout_s, metadata=self._metadata):
                kind = response.WhichOneof("kind")
                if kind == "result":
                    return _to_dict(response.result)
                if kind == "progress" and progress is not None:
                    progress(response.progress.evaluated, response.progress.total)
        except grpc.RpcError as e:
            raise VtrainError(e.code(), e.details()) from None
        raise VtrainError(grpc.StatusCode.INTERNAL, "the server ended the stream without a result")


# Requests: dict -> message.

def _parse(request, message_class):
    """`request` (a dict in JSON form) as a message_class, or VtrainError."""
    name = message_class.DESCRIPTOR.name
    if not isinstance(request, dict):
        raise VtrainError(grpc.StatusCode.INVALID_ARGUMENT,
                          f"a {name} must be a dict in JSON form, not {type(request).__name__}")
    _check(request, message_class.DESCRIPTOR, "")
    message = message_class()
    try:
        json_format.ParseDict(request, message)
    except (json_format.ParseError, TypeError, ValueError, AttributeError) as e:
        raise VtrainError(grpc.StatusCode.INVALID_ARGUMENT,
                          f"not a valid {message_class.DESCRIPTOR.full_name} in JSON form: "
                          f"{str(e).rstrip('.')}") from None
    return message


def _refuse(path, what):
    raise VtrainError(grpc.StatusCode.INVALID_ARGUMENT, f"{path or 'request'}: {what}")


def _check(value, desc, path):
    """Refuses, naming the key, what json_format would refuse less clearly or
    not at all: unknown keys, a key given twice (snake_case and lowerCamel),
    enum values the API does not name (by name or by number), a list where an
    object belongs and the reverse. The rest (scalar types) is left to
    json_format.ParseDict."""
    if not isinstance(value, dict):
        _refuse(path, f"expected a JSON object for {desc.full_name}, "
                      f"got {type(value).__name__}")
    seen = {}
    for key, item in value.items():
        if not isinstance(key, str):
            _refuse(path, f"keys must be strings, got {key!r}")
        field = desc.fields_by_name.get(key)
        if field is None:
            field = next((f for f in desc.fields if f.json_name == key), None)
        where = f"{path}.{key}" if path else key
        if field is None:
            known = ", ".join(f.name for f in desc.fields)
            _refuse(path, f"unknown key {key!r} in {desc.full_name} (its keys: {known})")
        if field.name in seen:
            _refuse(path, f"{field.name!r} is given twice (as {seen[field.name]!r} and {key!r})")
        seen[field.name] = key
        if item is None:
            continue  # null: the default, as protobuf's JSON parser reads it
        if field.label == _FD.LABEL_REPEATED:
            if not isinstance(item, list):
                _refuse(where, f"expected a list, got {type(item).__name__}")
            for i, element in enumerate(item):
                _check_value(element, field, f"{where}[{i}]")
        else:
            _check_value(item, field, where)


def _check_value(value, field, where):
    if field.type == _FD.TYPE_MESSAGE:
        if not field.message_type.file.name.startswith("google/protobuf/"):
            _check(value, field.message_type, where)
    elif field.type == _FD.TYPE_ENUM:
        enum = field.enum_type
        if isinstance(value, str):
            ok = value in enum.values_by_name
        elif isinstance(value, int) and not isinstance(value, bool):
            ok = value in enum.values_by_number
        else:
            ok = True  # a wrong type: ParseDict says so
        if not ok:
            names = ", ".join(v.name for v in enum.values)
            _refuse(where, f"bad enum value {value!r} for {enum.full_name} (one of {names})")


# Responses: message -> dict.

def _to_dict(message):
    """`message` as vtrainctl --json prints it (proto/json.cc)."""
    d = json_format.MessageToDict(message, preserving_proto_field_name=True, **_PRINT_DEFAULTS)
    return _as_vtrainctl(d, message.DESCRIPTOR)


def _as_vtrainctl(d, desc):
    """`d` (a message of type `desc` as json_format wrote it) as vtrainctl
    writes it: 64-bit integers as numbers rather than strings, and the keys
    in the order the fields are declared."""
    out = {}
    for field in desc.fields:
        if field.name not in d:
            continue
        value = d[field.name]
        if field.type in _INT64_TYPES:
            value = [int(v) for v in value] if isinstance(value, list) else int(value)
        elif (field.type == _FD.TYPE_MESSAGE
              and not field.message_type.file.name.startswith("google/protobuf/")):
            if isinstance(value, list):
                value = [_as_vtrainctl(v, field.message_type) for v in value]
            else:
                value = _as_vtrainctl(value, field.message_type)
        out[field.name] = value
    return out


# The former throughput_curves interface.

_MODEL_KEYS = frozenset(f.name for f in job_pb2.ModelSpec.DESCRIPTOR.fields)
_SHORT_DTYPES = {"fp16": "DTYPE_FP16", "bf16": "DTYPE_BF16", "fp8": "DTYPE_FP8"}


def _curve_job(index, job):
    """A flat job dict of throughput_curves() as a CurveJob dict."""
    if not isinstance(job, dict):
        _refuse(f"jobs[{index}]", f"a job must be a dict, not {type(job).__name__}")
    out = {"model": {}, "cluster": {}}
    for key, value in job.items():
        if key in _MODEL_KEYS:
            out["model"][key] = value
        elif key in ("gpu", "gpus_per_node"):
            out["cluster"][key] = value
        elif key == "dtype":
            out["dtype"] = _SHORT_DTYPES.get(value, value) if isinstance(value, str) else value
        elif key in ("name", "global_batch"):
            out[key] = value
        else:
            known = sorted(_MODEL_KEYS | {"gpu", "gpus_per_node", "dtype", "name", "global_batch"})
            _refuse(f"jobs[{index}]", f"unknown key {key!r} (a job's keys: {', '.join(known)})")
    if "global_batch" not in job:
        _refuse(f"jobs[{index}]", "a job needs 'global_batch'")
    return out


def _legacy_curve(curve):
    points = []
    for p in curve["points"]:
        point = {"gpus": p["gpus"], "fits": p["fits"]}
        if p["fits"]:
            plan = p.get("plan", {})
            point.update({
                "plan": {"t": plan.get("tensor_parallel", 0), "d": plan.get("data_parallel", 0),
                         "p": plan.get("pipeline_parallel", 0),
                         "micro_batch": plan.get("micro_batch", 0)},
                "plan_gpus": p["plan_gpus"],
                "iteration_time_ms": p["iteration_time_ms"],
                "iterations_per_s": p["iterations_per_s"],
                "samples_per_s": p["samples_per_s"],
                "tokens_per_s": p["tokens_per_s"],
            })
        points.append(point)
    return {"name": curve["name"], "points": points}
