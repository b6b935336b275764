"""Whether a Linux machine has an NVIDIA GPU and its driver (tracer/dlltrace/worlds/gpu.py), why the driver's
library was not there (loader/linux/fixes.py rule_driver_state), and the facts' way through a trace."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlltrace.render.fixwords import fix_text
from dlltrace.model import Fix
from dlltrace.worlds.elf import RecordedELFWorld, RecordingELFWorld, VirtualELFWorld
from dlltrace.worlds.gpu import GpuFacts, gpu_facts_from_dict, read_gpu_facts, rule_driver_state


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
    # a container of Docker Desktop (WSL 2) started without the GPU: no /dev/dxg, Hyper-V's devices on its PCI bus,
    # WSL's kernel: not "this machine has no NVIDIA GPU" (the Windows host's is not on that bus in any case)
    wsl = machine(tmp_path / "e", {"0000:00:00.0": ("0x1414", "0x030200"), "0001:00:00.0": ("0x1af4", "0x010000")})
    (wsl / "proc/sys/kernel").mkdir(parents=True)
    (wsl / "proc/sys/kernel/osrelease").write_text("5.15.153.1-microsoft-standard-WSL2\n")
    assert read_gpu_facts(str(wsl)) == GpuFacts(2, (), None, False, True)
    assert rule_driver_state(read_gpu_facts(str(wsl))) == ""
    # a Jetson (Orin): its GPU is the chip's own, driven by nvgpu; its PCI bus has the SoC's root ports and an NVMe
    # drive, no NVIDIA controller, and no /proc/driver/nvidia: not "no NVIDIA GPU", nor "no kernel driver"
    soc = {"0001:00:00.0": ("0x10de", "0x060400"), "0004:01:00.0": ("0x144d", "0x010802")}
    for where, content in (("proc/device-tree/compatible", "nvidia,p3737-0000+p3701-0005\0nvidia,tegra234\0"),
                           ("sys/module/nvgpu/refcnt", "3\n")):  # (in a container, /sys/firmware is hidden)
        jetson = machine(tmp_path / where.split("/")[0] / "j", soc)
        (jetson / where).parent.mkdir(parents=True)
        (jetson / where).write_text(content)
        assert rule_driver_state(read_gpu_facts(str(jetson))) == "", where
        assert read_gpu_facts(str(jetson)) == GpuFacts(2, (), None, False, False, True), where
    assert read_gpu_facts(str(wsl)).tegra is False
    assert gpu_facts_from_dict(GpuFacts(2, (), None, False, False, True).as_dict()).tegra is True


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


# --- Windows: the bootstrap reads them from the registry (trace/shim.py windows_gpu_fields) -----------------------
DISPLAY = "{4D36E968-E325-11CE-BFC1-08002BE10318}"


class FakeRegistry:
    """The few winreg calls windows_gpu_fields makes, over nested dicts: a key is a dict of subkeys, with its
    values in "=" (a dict)."""

    HKEY_LOCAL_MACHINE = "HKLM"

    class Key:
        def __init__(self, node):
            self.node = node

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def __init__(self, hklm: dict):
        self.root = {"HKLM": hklm}

    def OpenKey(self, key, sub):
        node = self.root[key] if isinstance(key, str) else key.node
        for part in sub.split("\\"):
            match = [k for k in node if k != "=" and k.lower() == part.lower()]
            if not match:
                raise OSError(2, "not found")
            node = node[match[0]]
        return self.Key(node)

    def EnumKey(self, key, i):
        names = [k for k in key.node if k != "="]
        if i >= len(names):
            raise OSError(259, "no more data")
        return names[i]

    def QueryValueEx(self, key, name):
        values = key.node.get("=", {})
        if name not in values:
            raise OSError(2, "not found")
        return values[name], 1


def registry(enum: dict, classes: dict) -> FakeRegistry:
    return FakeRegistry({"SYSTEM": {"CurrentControlSet": {"Enum": {"PCI": enum}, "Control": {"Class": {DISPLAY: classes}}}}})


def test_windows_gpu_fields():
    from dlltrace.trace.shim import windows_gpu_fields

    wine = {"VEN_0000&DEV_0000&SUBSYS_00000000&REV_00": {"00000000": {"=": {"ClassGUID": DISPLAY, "Driver": DISPLAY + "\\0000"}}}}
    bridge = {"VEN_8086&DEV_A0BC&SUBSYS_0000&REV_20": {"3&11583659&0&A0": {"=": {"ClassGUID": "{4d36e97d-e325-11ce-bfc1-08002be10318}"}}}}
    card = {"VEN_10DE&DEV_2204&SUBSYS_38801462&REV_A1": {
        "4&1e3b7a5&0&0008": {"=": {"ClassGUID": DISPLAY, "Driver": DISPLAY + "\\0001"}}}}
    audio = {"VEN_10DE&DEV_1AEF&SUBSYS_38801462&REV_A1": {  # (the card's HDMI audio: another class)
        "4&1e3b7a5&0&0108": {"=": {"ClassGUID": "{4d36e96c-e325-11ce-bfc1-08002be10318}"}}}}
    nvidia = {"0001": {"=": {"ProviderName": "NVIDIA", "DriverVersion": "32.0.15.6094"}}}
    basic = {"0001": {"=": {"ProviderName": "Microsoft", "DriverVersion": "10.0.19041.1"}}}
    assert windows_gpu_fields(registry(wine, {})) == {"pci_devices": 1, "nvidia_gpus": [], "kernel_driver": None,
                                                      "device_nodes": True, "wsl": False}
    got = windows_gpu_fields(registry({**bridge, **card, **audio}, nvidia))
    assert got["pci_devices"] == 3 and got["kernel_driver"] == "32.0.15.6094"
    assert got["nvidia_gpus"] == ["PCI\\VEN_10DE&DEV_2204&SUBSYS_38801462&REV_A1\\4&1e3b7a5&0&0008"]
    # an NVIDIA GPU on Windows' Basic Display Adapter: no NVIDIA driver
    assert windows_gpu_fields(registry({**bridge, **card}, basic))["kernel_driver"] is None
    assert windows_gpu_fields(FakeRegistry({}))["pci_devices"] == 0  # (no Enum\PCI: nothing known)
    # a laptop's NVIDIA GPU (a 3D controller, PCI class 0302) before NVIDIA's driver: no driver Windows has binds
    # it (the Basic Display Adapter takes VGA-class ones only), no display ClassGUID; its CompatibleIDs say what it is
    optimus = {"VEN_10DE&DEV_1F95&SUBSYS_13D1103C&REV_A1": {"4&2c1c4b3&0&0008": {"=": {
        "CompatibleIDs": ["PCI\\VEN_10DE&DEV_1F95&REV_A1", "PCI\\VEN_10DE&DEV_1F95", "PCI\\VEN_10DE&CC_030200",
                          "PCI\\VEN_10DE&CC_0302", "PCI\\VEN_10DE", "PCI\\CC_030200", "PCI\\CC_0302"]}}}}
    igpu = {"VEN_8086&DEV_9B41&SUBSYS_13D1103C&REV_02": {"3&11583659&0&10": {"=": {"ClassGUID": DISPLAY}}}}
    got = windows_gpu_fields(registry({**bridge, **igpu, **optimus}, {}))
    assert got["nvidia_gpus"] == ["PCI\\VEN_10DE&DEV_1F95&SUBSYS_13D1103C&REV_A1\\4&2c1c4b3&0&0008"], got
    assert rule_driver_state(gpu_facts_from_dict(got)) == "no_kernel_driver"
    hdmi = {"VEN_10DE&DEV_10FA&SUBSYS_0&REV_A1": {"4&1&0&0108": {"=": {"CompatibleIDs": ["PCI\\CC_0403"]}}}}
    assert windows_gpu_fields(registry({**hdmi}, {}))["nvidia_gpus"] == []  # (its audio function: class 04)
    states = [rule_driver_state(gpu_facts_from_dict(windows_gpu_fields(registry(e, c))))
              for e, c in ((wine, {}), ({**card}, basic), ({**card}, nvidia))]
    assert states == ["no_gpu", "no_kernel_driver", "no_user_library"]
    for state, words in [("no_gpu", "no NVIDIA display adapter"), ("no_kernel_driver", "without NVIDIA's driver, which "
                         "puts nvcuda.dll in System32"), ("no_user_library", "32.0.15.6094 is installed, without nvcuda.dll")]:
        fix = Fix("install", "install", name="nvcuda.dll", instruction="nvcuda.dll comes with the NVIDIA display driver",
                  value=state, driver="32.0.15.6094")
        assert words in fix_text(fix), (state, fix_text(fix))
    assert fix_text(Fix("install", "install", name="nvcuda.dll", instruction="as before")) == "as before"


@pytest.mark.wine
def test_a_windows_cpu_fallback_says_the_machine_has_no_nvidia_gpu(tmp_path):
    """A Windows Python under Wine tries nvcuda.dll, goes on without it and exits 0: the bootstrap's py_gpu holds
    what Wine's own reg.exe lists under Enum\\PCI (Wine's one display adapter, VEN_0000: no NVIDIA GPU), and the
    report's first line says the machine has none; the driver's fix says so."""
    import json
    import subprocess

    import realimports as ri
    import realwheels as rw
    import winetools

    winetools.require("wine")
    env = rw.or_skip(ri.base_env)
    trace = tmp_path / "t.jsonl"
    r = ri.run_python(env, "import ctypes\ntry:\n    ctypes.WinDLL('nvcuda.dll')\nexcept OSError:\n    print('on the CPU')",
                      traced=trace)
    assert r.returncode == 0 and "on the CPU" in r.stdout, r.stderr[-2000:]
    q = subprocess.run([winetools.wine_binary() or "wine64", "reg", "query",
                        "HKLM\\System\\CurrentControlSet\\Enum\\PCI", "/s"], capture_output=True,
                       env=winetools.wine_env(WINEDEBUG="-all"), timeout=120, stdin=subprocess.DEVNULL)
    keys = [x.strip() for x in q.stdout.decode("utf-8", "replace").splitlines() if x.startswith("HKEY_LOCAL_MACHINE")]
    # (an instance key is two below Enum\PCI: <vendor&device...>\<instance>)
    instances = [k for k in keys if len(k.upper().partition("\\ENUM\\PCI\\")[2].split("\\")) == 2]
    assert instances and not any("VEN_10DE" in k.upper() for k in instances), keys
    events = [json.loads(x) for x in trace.read_text(encoding="utf-8").splitlines()[1:]]
    (gpu,) = [e for e in events if e.get("ev") == "py_gpu"]
    assert (gpu["pci_devices"], gpu["nvidia_gpus"], gpu["kernel_driver"]) == (len(instances), [], None), (gpu, instances)
    doc = ri.report_json(trace)
    assert doc["outcome"]["kind"] == "degraded" and doc["outcome"]["gpu"] == "no_gpu", doc["outcome"]
    text = ri.report_text(trace)
    assert text.splitlines()[0].startswith("dlltrace ─ the program ran on the CPU: this machine has no NVIDIA GPU "
                                           "(nvcuda.dll did not load)"), text[:400]
    assert "This machine has no NVIDIA GPU (no NVIDIA display adapter)" in text


def test_rule_no_gpu_for_cuda_library():
    """A CUDA library not found on a machine with no NVIDIA GPU gets the driver's no-GPU advice first (the field
    test: onnxruntime-gpu 1.19's CUDA provider, libcublasLt.so.12, was offered `pip install nvidia-cublas-cu12`
    alone); with an NVIDIA GPU, with no facts, or for a library that is not CUDA's, the fixes as they are."""
    from dlltrace.loader.linux.fixes import rule_no_gpu_for_cuda_library
    from dlltrace.model import Fix

    class World:
        def __init__(self, gpu):
            self.gpu = gpu

        def gpu_facts(self):
            return self.gpu

    pip = [Fix("pip", "install_package", name="libcublasLt.so.12", package="nvidia-cublas-cu12")]
    none = GpuFacts(6, (), None, False, False)
    (first, rest) = rule_no_gpu_for_cuda_library("libcublasLt.so.12", World(none), pip)
    assert (first.action, first.value, first.name, rest) == ("install_driver", "no_gpu", "libcuda.so.1", pip[0])
    env = Fix("env", "set_env", name="libcublasLt.so.12", variable="LD_LIBRARY_PATH", value="/x", verified=True)
    assert [f.action for f in rule_no_gpu_for_cuda_library("libcublasLt.so.12", World(none), [env, *pip])] == \
        ["set_env", "install_driver", "install_package"]  # (a fix the model verified first: the load works)
    assert rule_no_gpu_for_cuda_library("libcudnn.so.9", World(none), [])[0].value == "no_gpu"
    card = GpuFacts(6, ("0000:01:00.0",), None, False, False)  # (a GPU, no driver: the library is a fix)
    assert rule_no_gpu_for_cuda_library("libcublasLt.so.12", World(card), pip) == pip
    assert rule_no_gpu_for_cuda_library("libcublasLt.so.12", World(None), pip) == pip  # (not known)
    assert rule_no_gpu_for_cuda_library("libpng16.so.16", World(none), pip) == pip  # (not a CUDA library)


def test_a_trace_s_cuda_table_says_what_it_never_looked_at_is_not_in_it():
    """`dlltrace cuda --trace`: a trace holds only the files the program looked for, so a section with no rows
    reads "none in the trace", not "none found" (a toolkit in /usr/local/cuda-13.0 the program never searched);
    the machine's own table still says "none found"."""
    from dataclasses import replace as dc_replace

    from dlltrace.diagnosis.cuda import CudaTable
    from dlltrace.render.cuda import cuda_markdown, none_found

    t = CudaTable("linux", "trace", None, (), (), (), (), (), ())
    assert none_found(t).startswith("none in the trace")
    assert none_found(dc_replace(t, origin="machine")) == "none found"
    assert "**Toolkits:** none in the trace" in cuda_markdown(t)


@pytest.mark.wine
def test_a_windows_program_that_dies_of_nvcuda_is_told_the_machine_has_no_gpu(tmp_path):
    """The same Windows Python under Wine, dying of its nvcuda.dll load (torch's .cuda() does so on Windows): the
    first line is the count, then that the program needs an NVIDIA GPU and this machine has none (text and
    Markdown), as on Linux; the JSON's outcome.gpu says no_gpu."""
    import realimports as ri
    import realwheels as rw
    import winetools

    winetools.require("wine")
    env = rw.or_skip(ri.base_env)
    trace = tmp_path / "t.jsonl"
    r = ri.run_python(env, "import ctypes\nctypes.WinDLL('nvcuda.dll')", traced=trace)
    assert r.returncode == 1 and "nvcuda.dll" in r.stderr, r.stderr[-2000:]
    text = ri.report_text(trace)
    assert text.splitlines()[0].startswith(
        "dlltrace ─ 1 failed load: the program needs an NVIDIA GPU, and this machine has none"), text[:400]
    assert "**dlltrace:** the program needs an NVIDIA GPU, and this machine has none." in ri.report_markdown(trace)
    assert ri.report_json(trace)["outcome"]["gpu"] == "no_gpu"
