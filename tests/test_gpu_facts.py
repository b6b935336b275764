"""Whether a Linux machine has an NVIDIA GPU and its driver (tracer/dlltrace/worlds/gpu.py), why the driver's
library was not there (loader/linux/fixes.py rule_driver_state), and the facts' way through a trace."""

from __future__ import annotations

from pathlib import Path

from dlltrace.loader.linux.fixes import rule_driver_state
from dlltrace.render.fixwords import fix_text
from dlltrace.model import Fix
from dlltrace.worlds.elf import RecordedELFWorld, RecordingELFWorld, VirtualELFWorld
from dlltrace.worlds.gpu import GpuFacts, gpu_facts_from_dict, read_gpu_facts


def machine(root: Path, devices: dict, version: str | None = None, nodes: tuple = ()) -> Path:
    """A fake / with sysfs PCI devices ({address: (vendor, class)}), /proc/driver/nvidia/version, /dev nodes."""
    for addr, (vendor, klass) in devices.items():
        d = root / "sys/bus/pci/devices" / addr
        d.mkdir(parents=True)
        (d / "vendor").write_text(vendor + "\n")
        (d / "class").write_text(klass + "\n")
    if version is not None:
        (root / "proc/driver/nvidia").mkdir(parents=True)
        (root / "proc/driver/nvidia/version").write_text(version)
    (root / "dev").mkdir(parents=True, exist_ok=True)
    for n in nodes:
        (root / "dev" / n).write_text("")
    return root


HOST = {"0000:00:00.0": ("0x8086", "0x060000"), "0000:00:02.0": ("0x1af4", "0x018000")}
CARD = {"0000:01:00.0": ("0x10de", "0x030000"), "0000:01:00.1": ("0x10de", "0x040300")}  # (its HDMI audio: 0x04)
NVRM = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
        "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")


def test_read_gpu_facts(tmp_path):
    none = read_gpu_facts(str(machine(tmp_path / "a", HOST)))
    assert none == GpuFacts(2, (), None, False, False)
    full = read_gpu_facts(str(machine(tmp_path / "b", {**HOST, **CARD}, NVRM, ("nvidiactl", "nvidia0"))))
    assert full == GpuFacts(4, ("0000:01:00.0",), "535.104.05", True, False)  # (the card's audio function is not a GPU)
    open_module = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.14  Release Build  (dvs-builder@U16)\n"
    assert read_gpu_facts(str(machine(tmp_path / "c", CARD, open_module))).kernel_driver == "550.54.14"
    assert read_gpu_facts(str(machine(tmp_path / "d", {}, None, ("dxg",)))) == GpuFacts(0, (), None, False, True)
    assert read_gpu_facts(str(tmp_path / "nothing")) == GpuFacts(0, (), None, False, False)


def test_rule_driver_state():
    assert rule_driver_state(None) == ""  # (an older trace, a virtual world: not known)
    assert rule_driver_state(GpuFacts(0, (), None, False, False)) == ""  # (the bus could not be read)
    assert rule_driver_state(GpuFacts(6, (), None, False, True)) == ""  # (WSL 2: the Windows host's driver)
    assert rule_driver_state(GpuFacts(6, (), None, False, False)) == "no_gpu"
    assert rule_driver_state(GpuFacts(6, ("0000:01:00.0",), None, False, False)) == "no_kernel_driver"
    assert rule_driver_state(GpuFacts(6, ("0000:01:00.0",), "535.104.05", False, False)) == "no_device_nodes"
    assert rule_driver_state(GpuFacts(6, ("0000:01:00.0",), "535.104.05", True, False)) == "no_user_library"


def test_the_facts_go_through_a_trace_and_older_traces_have_none():
    facts = GpuFacts(4, ("0000:01:00.0",), "535.104.05", False, False)

    class Base(VirtualELFWorld):
        def gpu_facts(self):
            return facts
    rec = RecordingELFWorld(Base({}))
    assert rec.events(1)[0].get("gpu") is None  # (recorded only when the replay asked)
    assert rec.gpu_facts() == facts
    events = rec.events(1)
    assert gpu_facts_from_dict(events[0]["gpu"]) == facts
    assert RecordedELFWorld(events).gpu_facts() == facts
    old = dict(events[0])
    del old["gpu"]
    assert RecordedELFWorld([old]).gpu_facts() is None
    assert gpu_facts_from_dict({"pci_devices": "6", "nvidia_gpus": []}) is None


def test_each_driver_state_has_its_words():
    for state, words in [("no_gpu", "This machine has no NVIDIA GPU (none on its PCI bus)"),
                         ("no_kernel_driver", "Install the NVIDIA driver: this machine has an NVIDIA GPU"),
                         ("no_device_nodes", "docker run --gpus all"),
                         ("no_user_library", "kernel driver's version, 535.104.05")]:
        text = fix_text(Fix("driver", "install_driver", name="libcuda.so.1", value=state, driver="535.104.05",
                            python=False))
        assert words in text, (state, text)
    assert fix_text(Fix("driver", "install_driver", name="libcuda.so.1", python=False)) == "Install an NVIDIA driver"
