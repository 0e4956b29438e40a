"""cpu-features: Node Feature Discovery-compatible CPU labels from /proc/cpuinfo.

Sets, for x86 and arm64:

    feature.node.kubernetes.io/cpu-cpuid.<FLAG>=true     each flag in the allow-list
    feature.node.kubernetes.io/cpu-model.vendor_id=Intel|AMD|ARM|...
    feature.node.kubernetes.io/cpu-model.family=<n>
    feature.node.kubernetes.io/cpu-model.id=<n>
    feature.node.kubernetes.io/cpu-hardware_multithreading=true|false   (x86)

and removes the labels of those families that no longer apply. Config:

    flags:   [AVX2, AVX512F, ...]   NFD names to label (default: DEFAULT_FLAGS); "*" for all
    exclude: [HYPERVISOR]           names never to label
"""

import re
from typing import Dict, List, Optional, Set

import nodestatus
from nodestatus import Error, Metadata, Node, host

VERSION = "0.1.0"
CPUINFO = "/proc/cpuinfo"
PREFIX = "feature.node.kubernetes.io/cpu-"
# The label families this plugin owns; NFD's other cpu- labels (pstate,
# cstate, rdt, security, ...) are left alone.
MANAGED = (PREFIX + "cpuid.", PREFIX + "model.", PREFIX + "hardware_multithreading")

# /proc/cpuinfo `flags` (x86) -> the name NFD uses (klauspost/cpuid's FeatureID).
# A flag not listed here is named by upper-casing it (sse4a -> SSE4A).
X86_NAMES = {
    "fpu": "X87",
    "cx8": "CMPXCHG8",
    "ht": "HTT",
    "pni": "SSE3",
    "pclmulqdq": "CLMUL",
    "fma": "FMA3",
    "sse4_1": "SSE4",
    "sse4_2": "SSE42",
    "aes": "AESNI",
    "lahf_lm": "LAHF",
    "abm": "LZCNT",
    "fxsr_opt": "FXSROPT",
    "sha_ni": "SHA",
    "avx512_vbmi2": "AVX512VBMI2",
    "avx512_vnni": "AVX512VNNI",
    "avx512_bitalg": "AVX512BITALG",
    "avx512_vpopcntdq": "AVX512VPOPCNTDQ",
    "avx512_vp2intersect": "AVX512VP2INTERSECT",
    "avx512_bf16": "AVX512BF16",
    "avx512_fp16": "AVX512FP16",
    "avx_vnni": "AVXVNNI",
    "avx_ifma": "AVXIFMA",
    "avx_ne_convert": "AVXNECONVERT",
    "avx_vnni_int8": "AVXVNNIINT8",
    "amx_tile": "AMXTILE",
    "amx_bf16": "AMXBF16",
    "amx_int8": "AMXINT8",
    "amx_fp16": "AMXFP16",
    "amx_complex": "AMXCOMPLEX",
    "sgx_lc": "SGXLC",
    "arch_capabilities": "IA32_ARCH_CAP",
    "spec_ctrl_ssbd": "SPEC_CTRL_SSBD",
}

# The flags labelled by default: what workloads select nodes on (vector and
# matrix units, crypto, virtualization). NFD labels nearly every flag and
# hides the baseline ones (SSE..SSE42, CMOV, POPCNT, ...); this list keeps
# SSE4/SSE42 (x86-64-v2) on purpose. Names of both x86 and arm64.
DEFAULT_FLAGS = [
    # x86
    "AVX", "AVX2", "FMA3", "AVX512F", "AVX512BW", "AVX512CD", "AVX512DQ", "AVX512VL",
    "AVX512VNNI", "AVX512BF16", "AVX512FP16", "AVX512IFMA", "AVX512VBMI", "AVX512VBMI2",
    "AVX512BITALG", "AVX512VPOPCNTDQ", "AVXVNNI", "AMXTILE", "AMXBF16", "AMXINT8", "AMXFP16",
    "SSE4", "SSE42", "AESNI", "VAES", "VPCLMULQDQ", "GFNI", "SHA", "ADX",
    "VMX", "SVM", "HYPERVISOR",
    # arm64
    "ASIMD", "ASIMDDP", "ASIMDHP", "FPHP", "AES", "PMULL", "SHA1", "SHA2", "SHA3", "SHA512",
    "CRC32", "ATOMICS", "SVE", "SVE2", "I8MM", "BF16",
]

X86_VENDORS = {
    "GenuineIntel": "Intel",
    "AuthenticAMD": "AMD",
    "HygonGenuine": "Hygon",
    "CentaurHauls": "VIA",
    "VIA VIA VIA": "VIA",
    "GenuineTMx86": "Transmeta",
    "TransmetaCPU": "Transmeta",
    "Geode by NSC": "NSC",
    "SiS SiS SiS": "SiS",
    "Genuine  RDC": "RDC",
}

# `CPU implementer` (MIDR_EL1[31:24]) -> klauspost/cpuid's vendor name.
ARM_VENDORS = {
    0x41: "ARM",
    0x42: "Broadcom",
    0x43: "Cavium",
    0x44: "DEC",
    0x46: "Fujitsu",
    0x49: "Infineon",
    0x4D: "Motorola",
    0x4E: "NVIDIA",
    0x50: "AMCC",
    0x51: "Qualcomm",
    0x56: "Marvell",
    0x69: "Intel",
    0xC0: "Ampere",
}


class CpuInfo:
    """What /proc/cpuinfo says about the first CPU."""

    def __init__(self, arch: str, flags: Set[str], vendor: str, family: Optional[int],
                 model: Optional[int], multithreading: Optional[bool]) -> None:
        self.arch = arch  # "x86" or "arm"
        self.flags = flags  # NFD names
        self.vendor = vendor
        self.family = family
        self.model = model
        self.multithreading = multithreading


def _blocks(text: str) -> List[Dict[str, str]]:
    blocks, cur = [], {}
    for line in text.splitlines():
        if not line.strip():
            if cur:
                blocks.append(cur)
                cur = {}
            continue
        key, sep, value = line.partition(":")
        if sep:
            cur.setdefault(key.strip(), value.strip())
    if cur:
        blocks.append(cur)
    return blocks


def _int(s: Optional[str]) -> Optional[int]:
    if s is None:
        return None
    try:
        return int(s, 0)  # "25", "0x41"
    except ValueError:
        return None


def _label_value(s: str) -> str:
    """A string as a valid label value: [A-Za-z0-9._-], alphanumeric at both
    ends, at most 63 characters."""
    v = re.sub(r"[^A-Za-z0-9._-]+", "_", s.strip())[:63]
    return v.strip("._-") or "unknown"


def x86_name(flag: str) -> str:
    return X86_NAMES.get(flag, flag.upper())


def arm_name(feature: str) -> str:
    return feature.upper().replace("_", "")


def parse(text: str) -> CpuInfo:
    """Reads /proc/cpuinfo's text. Raises Error when it lists no flags."""
    for b in _blocks(text):
        if "flags" in b:
            raw = b.get("vendor_id", "")
            siblings, cores = _int(b.get("siblings")), _int(b.get("cpu cores"))
            return CpuInfo(
                arch="x86",
                flags={x86_name(f) for f in b["flags"].split()},
                vendor=X86_VENDORS.get(raw.strip(), _label_value(raw)),
                family=_int(b.get("cpu family")),
                model=_int(b.get("model")),
                multithreading=(siblings > cores) if siblings and cores else None,
            )
        if "Features" in b:
            impl = _int(b.get("CPU implementer"))
            variant, part, rev = _int(b.get("CPU variant")), _int(b.get("CPU part")), _int(b.get("CPU revision"))
            # As klauspost/cpuid reads MIDR_EL1: family = MIDR[23:16]
            # (variant, and architecture 0xf), id = MIDR[15:0] (part, revision).
            return CpuInfo(
                arch="arm",
                flags={arm_name(f) for f in b["Features"].split()},
                vendor=ARM_VENDORS.get(impl, _label_value(b.get("CPU implementer", ""))) if impl is not None else "unknown",
                family=(variant << 4 | 0xF) if variant is not None else None,
                model=(part << 4 | (rev or 0)) if part is not None else None,
                multithreading=None,
            )
    raise Error(
        f"{CPUINFO} lists no CPU flags (no x86 `flags` or arm64 `Features` line); "
        "this architecture is not supported"
    )


def _names(config: dict, key: str) -> Optional[List[str]]:
    v = config.get(key)
    if v is None:
        return None
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise Error(f"invalid config: {key} must be a list of strings, not {v!r}")
    return v


def labels(info: CpuInfo, config: Optional[dict] = None) -> Dict[str, str]:
    """The labels for this CPU under this config."""
    config = config or {}
    allow = _names(config, "flags")
    allow = DEFAULT_FLAGS if allow is None else allow
    exclude = set(_names(config, "exclude") or [])
    every = "*" in allow
    wanted = set(allow)
    out = {}
    for name in sorted(info.flags):
        if (every or name in wanted) and name not in exclude and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
            out[f"{PREFIX}cpuid.{name}"] = "true"
    out[PREFIX + "model.vendor_id"] = info.vendor
    if info.family is not None:
        out[PREFIX + "model.family"] = str(info.family)
    if info.model is not None:
        out[PREFIX + "model.id"] = str(info.model)
    if info.multithreading is not None:
        out[PREFIX + "hardware_multithreading"] = "true" if info.multithreading else "false"
    return out


def apply(node: Node, want: Dict[str, str]) -> List[str]:
    """Sets `want` and removes this plugin's labels that are not in it.
    Returns the removed keys."""
    for k, v in want.items():
        node.set_label(k, v)
    stale = [k for k in node.labels() if k.startswith(MANAGED) and k not in want]
    for k in stale:
        node.remove_label(k)
    return stale


def read_cpuinfo(path: str = CPUINFO) -> str:
    try:
        return host.read_file(path)
    except nodestatus.FileError as e:
        hint = " (plugins: {cpu-features: {paths: [/proc]}})" if e.code == "not-granted" else ""
        raise Error(f"cannot read {e}{hint}") from None


class Setter(nodestatus.Plugin):
    def metadata(self) -> Metadata:
        return Metadata(
            "cpu-features",
            VERSION,
            description="NFD-compatible CPU labels (cpuid flags, model, multithreading) from /proc/cpuinfo",
            paths=["/proc"],
        )

    def set(self, node: Node) -> None:
        config = host.config()
        info = parse(read_cpuinfo())
        want = labels(info, config)
        removed = apply(node, want)
        host.debug(f"{info.arch} {info.vendor}: {len(want)} labels, removed {len(removed)}")
