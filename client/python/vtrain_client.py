"""A small Python client for vtrain-server (the vtrain.v1 API).

The stubs (vtrain/v1/vtrain_pb2.py, vtrain_pb2_grpc.py) are generated from
proto/ at build time into build/client/python/gen with Debian's protoc and
grpc_python_plugin; put that directory on sys.path (the example does).

    client = VtrainClient("127.0.0.1:50051")
    for curve in client.throughput_curves([{"name": "gpt3-13b", "preset": "gpt3-13b",
                                            "global_batch": 512}],
                                          gpu_counts=[8, 16, 32], policy="best"):
        print(curve["name"], curve["points"])
"""

import grpc

from vtrain.v1 import vtrain_pb2
from vtrain.v1 import vtrain_pb2_grpc

_POLICIES = {
    "best": vtrain_pb2.CURVE_POLICY_BEST,
    "data-parallel": vtrain_pb2.CURVE_POLICY_DATA_PARALLEL,
}


class VtrainError(Exception):
    """A call failed; `code` is the gRPC status code, the message names the field."""

    def __init__(self, code, message):
        super().__init__(f"{code.name}: {message}")
        self.code = code


class VtrainClient:
    """Calls one vtrain-server. `ca_file` selects TLS; `token` is sent as a bearer token."""

    def __init__(self, address, token=None, ca_file=None, timeout_s=60.0):
        if ca_file:
            with open(ca_file, "rb") as f:
                creds = grpc.ssl_channel_credentials(root_certificates=f.read())
            self._channel = grpc.secure_channel(address, creds)
        else:
            self._channel = grpc.insecure_channel(address)
        self._simulator = vtrain_pb2_grpc.SimulatorStub(self._channel)
        self._metadata = [("authorization", f"Bearer {token}")] if token else []
        self._timeout_s = timeout_s

    def close(self):
        self._channel.close()

    def _call(self, method, request):
        try:
            return method(request, timeout=self._timeout_s, metadata=self._metadata)
        except grpc.RpcError as e:
            raise VtrainError(e.code(), e.details()) from None

    def throughput_curves(self, jobs, gpu_counts=None, max_gpus=0, step=0, policy="best",
                          monotone=False):
        """One curve per job: [{"name", "points": [{"gpus", "fits", "plan", ...}]}].

        A job is a dict with "preset" (or "num_layers", "hidden_size", "num_heads",
        "seq_len"), "global_batch", and optionally "name", "gpu", "gpus_per_node".
        """
        request = vtrain_pb2.ThroughputCurveRequest(
            gpu_counts=gpu_counts or [], max_gpus=max_gpus, step=step,
            policy=_POLICIES[policy], monotone=monotone)
        for job in jobs:
            j = request.jobs.add()
            j.name = job.get("name", "")
            j.model.preset = job.get("preset", "")
            for field in ("num_layers", "hidden_size", "num_heads", "seq_len"):
                if field in job:
                    setattr(j.model, field, job[field])
            j.cluster.gpu = job.get("gpu", "")
            j.cluster.gpus_per_node = job.get("gpus_per_node", 0)
            j.global_batch = job["global_batch"]
        response = self._call(self._simulator.ThroughputCurve, request)
        return [_curve_dict(c) for c in response.curves]


def _curve_dict(curve):
    points = []
    for p in curve.points:
        point = {"gpus": p.gpus, "fits": p.fits}
        if p.fits:
            point.update({
                "plan": {"t": p.plan.tensor_parallel, "d": p.plan.data_parallel,
                         "p": p.plan.pipeline_parallel, "micro_batch": p.plan.micro_batch},
                "plan_gpus": p.plan_gpus,
                "iteration_time_ms": p.iteration_time_ms,
                "iterations_per_s": p.iterations_per_s,
                "samples_per_s": p.samples_per_s,
                "tokens_per_s": p.tokens_per_s,
            })
        points.append(point)
    return {"name": curve.name, "points": points}
