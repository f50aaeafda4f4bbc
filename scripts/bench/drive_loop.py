#!/usr/bin/env python3
"""Drive loop against a running `koru daemon`: the footprint acceptance check's loop (one plugin,
one controller; drive.create, the plugin's received+submitted acks in one write, drive.get until
the drive ended), timed over N drives after 300 warm-up, with the daemon's on-CPU time per drive
for the whole process and per thread (/proc/PID/task/*/stat). Standard library only.

usage: drive_loop.py SOCKET DAEMON_PID WORKSPACE_DIR [DRIVES]
"""
import json
import os
import socket
import sys
import time


def hello(role, folder=None):
    message = {"v": 1, "type": "hello", "id": 1, "role": role, "protocol": {"min": 1, "max": 1},
               "client": {"name": "drive-loop", "version": "0"}}
    if role == "plugin":
        message.update({"ide": {"product": "vscode", "version": "1.99.0"},
                        "window": {"pid": os.getpid(), "workspace_folders": [folder]},
                        "capabilities": [{"kind": "native_send"}, {"kind": "drive_steps"},
                                         {"kind": "command", "id": "workbench.action.chat.open"}]})
    return (json.dumps(message) + "\n").encode()


def read_message(sock, buffer):
    while b"\n" not in buffer[0]:
        chunk = sock.recv(65536)
        if not chunk:
            raise EOFError("the daemon closed the connection")
        buffer[0] += chunk
    line, _, rest = buffer[0].partition(b"\n")
    buffer[0] = rest
    return json.loads(line)


def on_cpu_seconds(pid, tid=None):
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    fields = open(path).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def threads(pid):
    seen = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            seen[f"{name}/{tid}"] = on_cpu_seconds(pid, tid)
        except FileNotFoundError:
            pass
    return seen


def main():
    path, pid, workspace = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    drives = int(sys.argv[4]) if len(sys.argv) > 4 else 20_000
    plugin = socket.socket(socket.AF_UNIX)
    plugin.connect(path)
    plugin.sendall(hello("plugin", workspace))
    plugin_buffer = [b""]
    read_message(plugin, plugin_buffer)
    controller = socket.socket(socket.AF_UNIX)
    controller.connect(path)
    controller.sendall(hello("controller"))
    controller_buffer = [b""]
    read_message(controller, controller_buffer)

    def drive(number):
        controller.sendall((json.dumps({"v": 1, "type": "drive.create", "id": number,
                                        "target": {"workspace": workspace},
                                        "prompt": f"drive loop {number}"}) + "\n").encode())
        order = read_message(plugin, plugin_buffer)
        while order.get("type") != "drive":
            if order.get("type") == "ping":
                plugin.sendall((json.dumps({"v": 1, "type": "pong", "id": order.get("id")}) + "\n").encode())
            order = read_message(plugin, plugin_buffer)
        drive_id = order["drive_id"]
        plugin.sendall((json.dumps({"v": 1, "type": "ack", "drive_id": drive_id, "stage": "received"}) + "\n"
                        + json.dumps({"v": 1, "type": "ack", "drive_id": drive_id, "stage": "submitted"}) + "\n").encode())
        while read_message(controller, controller_buffer).get("id") != number:
            pass
        while True:
            controller.sendall((json.dumps({"v": 1, "type": "drive.get", "id": f"g{number}",
                                            "drive_id": drive_id}) + "\n").encode())
            answer = read_message(controller, controller_buffer)
            while answer.get("id") != f"g{number}":
                answer = read_message(controller, controller_buffer)
            state = answer.get("drive", {}).get("state")
            if state in ("done", "failed", "timed_out", "cancelled"):
                return state

    for number in range(300):
        drive(number)
    before, threads_before, wall = on_cpu_seconds(pid), threads(pid), time.perf_counter()
    not_done = sum(drive(number) != "done" for number in range(300, 300 + drives))
    threads_after = threads(pid)
    print(f"daemon on-CPU per drive {(on_cpu_seconds(pid) - before) / drives * 1e6:.1f} us "
          f"(wall {(time.perf_counter() - wall) / drives * 1e6:.1f} us per drive, {not_done} not done)")
    for name in sorted(threads_after):
        spent = threads_after[name] - threads_before.get(name, 0.0)
        if spent > 0:
            print(f"  {name.split('/')[0]:<18} {spent / drives * 1e6:8.1f} us per drive")


if __name__ == "__main__":
    main()
