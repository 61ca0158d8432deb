"""Drives a zoo replica through menagerie_client and prints what it saw as one JSON object.

    python3 clients/python/interop.py HOST:PORT LEXICON_CSV

Used by Tests/IntegrationTests/PythonClientTests.swift, which starts the replica (with its sample
data) and checks the printed figures. Exits 1 with a message when a protocol rule is broken here.
"""

import json
import os
import sys
import threading
import time

from menagerie_client import Connection, RpcError, DEADLINE_EXCEEDED  # also puts generated/ on the path
from menagerie.rpc.v1 import rpc_pb2
from menagerie.zoo.v1 import zoo_pb2
from menagerie.jobs.v1 import jobs_pb2

HEALTH = "/menagerie.rpc.v1.Health/Check"
REFLECTION = "/menagerie.rpc.v1.Reflection/ListServices"
SEARCH = "/menagerie.zoo.v1.Zoo/SearchAnimals"
GET_ANIMAL = "/menagerie.zoo.v1.Zoo/GetAnimal"
IMPORT = "/menagerie.zoo.v1.Zoo/ImportData"
WATCH = "/menagerie.jobs.v1.Jobs/WatchJob"


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    lexicon = open(sys.argv[2], "rb").read()
    report = {}
    with Connection(host, int(port)) as conn:
        health = conn.unary(HEALTH, rpc_pb2.HealthCheckRequest(), rpc_pb2.HealthCheckResponse, timeout=5,
                            metadata={"request-id": "interop-1"})
        report["health"] = {"status": rpc_pb2.ServingStatus.Name(health.status), "server_name": health.server_name,
                            "pid": health.pid}

        listed = conn.unary(REFLECTION, rpc_pb2.ListServicesRequest(), rpc_pb2.ListServicesResponse, timeout=5)
        report["services"] = sorted(service.name for service in listed.services)
        report["streaming_methods"] = sorted(
            method.path for service in listed.services for method in service.methods if method.server_streaming)

        found = conn.unary(SEARCH, zoo_pb2.SearchAnimalsRequest(text="zelva"), zoo_pb2.SearchAnimalsResponse,
                           timeout=5, metadata=[("request-id", "interop-2"), ("x-note", "two keys")])
        report["search"] = {"total": found.total, "first": found.animals[0].name if found.animals else None,
                            "first_id": found.animals[0].id if found.animals else None}

        try:
            conn.unary(GET_ANIMAL, zoo_pb2.GetAnimalRequest(id=987654), zoo_pb2.GetAnimalResponse, timeout=5)
            report["not_found"] = {"code": 0}
        except RpcError as error:
            report["not_found"] = {"code": error.code, "message": error.message}

        try:
            conn.unary("/menagerie.zoo.v1.Zoo/NoSuchMethod", zoo_pb2.GetAnimalRequest(), zoo_pb2.GetAnimalResponse,
                       timeout=5)
            report["unknown_method"] = 0
        except RpcError as error:
            report["unknown_method"] = error.code

        # A deadline of zero has passed when the server reads the call.
        try:
            conn.unary(SEARCH, zoo_pb2.SearchAnimalsRequest(text="lev"), zoo_pb2.SearchAnimalsResponse, timeout=0)
            report["zero_deadline"] = 0
        except RpcError as error:
            report["zero_deadline"] = error.code

        # A pipelined burst: every request written before any answer is read, from one thread, then
        # each answer matched to its call by id. Even ids ask for an animal that exists, odd ones not.
        existing = report["search"]["first_id"]
        burst = []
        for index in range(200):
            if index % 4 == 3:
                burst.append(("health", conn.start_unary(HEALTH, rpc_pb2.HealthCheckRequest(),
                                                         rpc_pb2.HealthCheckResponse, timeout=30)))
            elif index % 2 == 0:
                burst.append(("animal", conn.start_unary(GET_ANIMAL, zoo_pb2.GetAnimalRequest(id=existing),
                                                         zoo_pb2.GetAnimalResponse, timeout=30)))
            else:
                burst.append(("missing", conn.start_unary(GET_ANIMAL, zoo_pb2.GetAnimalRequest(id=900000 + index),
                                                          zoo_pb2.GetAnimalResponse, timeout=30)))
        ids = [pending.id for _, pending in burst]
        if len(set(ids)) != len(ids):
            raise SystemExit("call ids repeat within the burst")
        outcomes = {"animal": 0, "missing": 0, "health": 0, "wrong": 0}
        for kind, pending in burst:
            try:
                response = pending.result()
                ok = (kind == "animal" and response.animal.id == existing) or \
                     (kind == "health" and response.status == rpc_pb2.SERVING_STATUS_SERVING)
            except RpcError as error:
                ok = kind == "missing" and error.code == 5
            outcomes[kind if ok else "wrong"] += 1
        report["burst"] = outcomes

        # Pipelined from several threads at once on the same connection.
        errors = []

        def worker():
            try:
                for _ in range(20):
                    got = conn.unary(SEARCH, zoo_pb2.SearchAnimalsRequest(text="lev"), zoo_pb2.SearchAnimalsResponse,
                                     timeout=30)
                    if got.total < 1:
                        errors.append("empty search")
            except RpcError as error:
                errors.append(str(error))
        threads = [threading.Thread(target=worker) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        report["threads"] = {"calls": 80, "errors": errors}

        # A server stream: an import runs as a job; WatchJob streams it until it ends. An import changes shared
        # data, so it carries the admin token (the test gives the replica and this script the same one).
        admin = {"authorization": "Bearer " + os.environ.get("MENAGERIE_ADMIN_TOKEN", "")}
        job = conn.unary(IMPORT, zoo_pb2.ImportDataRequest(
            files=[zoo_pb2.ImportFile(kind=zoo_pb2.FILE_KIND_LEXICON_CSV, name="lexikon-zvirat.csv", content=lexicon)],
            source="python interop"), jobs_pb2.Job, timeout=30, metadata=admin)
        states = []
        for update in conn.server_stream(WATCH, jobs_pb2.WatchJobRequest(id=job.id), jobs_pb2.Job, timeout=60):
            states.append(jobs_pb2.JobState.Name(update.state))
            last = update
        report["watch"] = {"job": job.id, "kind": job.kind, "updates": len(states), "states": sorted(set(states)),
                           "last": states[-1] if states else None,
                           "result_type": last.result.type_name if states else None}
        report["after_import"] = conn.unary(SEARCH, zoo_pb2.SearchAnimalsRequest(), zoo_pb2.SearchAnimalsResponse,
                                            timeout=5).total

        # A stream of an unknown job fails with its status (NOT_FOUND), not with an empty stream.
        try:
            list(conn.server_stream(WATCH, jobs_pb2.WatchJobRequest(id="no-such-job"), jobs_pb2.Job, timeout=5))
            report["watch_unknown"] = 0
        except RpcError as error:
            report["watch_unknown"] = error.code

        # The connection is still usable after all of that.
        report["final_health"] = rpc_pb2.ServingStatus.Name(
            conn.unary(HEALTH, rpc_pb2.HealthCheckRequest(), rpc_pb2.HealthCheckResponse, timeout=5).status)
    report["deadline_code"] = DEADLINE_EXCEEDED
    print(json.dumps(report, sort_keys=True))


if __name__ == "__main__":
    main()
