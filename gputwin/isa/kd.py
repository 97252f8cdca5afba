"""AMDHSA kernel descriptors: the 64-byte `.kd` object, its fields as data, and the `.amdhsa_kernel` directives.

Layouts and granules follow LLVM's AMDGPUUsage ("Kernel Descriptor", "compute_pgm_rsrc1/2/3", "Code Object V3+
Kernel Descriptor"); defaults and checks of the directive block follow what llvm-mc-22 accepts and emits, and
tests/isa/test_codeobj.py compares our descriptors with llvm-mc-22's byte for byte.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from gputwin.errors import CodeObjectError, GputwinError
from gputwin.isa import targets
from gputwin.isa.targets import Target

KD_SIZE = 64


MACH_TO_TARGET = {mach: targets.target(name) for mach, name in targets.MACH.items()}


def target(arch: str) -> Target:
  try:
    return targets.target(arch)
  except GputwinError:
    raise CodeObjectError(f"unknown target {arch!r} (known: {', '.join(targets.TARGETS)})") from None


# Which targets a field or directive exists on.
_ON = {
  "all": lambda t: True, "gfx9+": lambda t: t.major >= 9, "gfx90a": lambda t: t.gfx90a,
  "gfx10+": lambda t: t.major >= 10, "gfx10-11": lambda t: 10 <= t.major <= 11, "gfx11": lambda t: t.major == 11,
  "gfx11+": lambda t: t.major >= 11, "gfx12+": lambda t: t.major >= 12, "gfx6-11": lambda t: t.major <= 11,
}

# Where each KD word lives: byte offset, byte size.
_WORDS = {"group": (0, 4), "private": (4, 4), "kernarg": (8, 4), "entry": (16, 8), "rsrc3": (44, 4), "rsrc1": (48, 4),
          "rsrc2": (52, 4), "kcp": (56, 2), "preload": (58, 2)}

# field -> [(word, shift, width, where)]; a field may sit at different bits per target (inst_pref_size).
_F = [
  ("group_segment_fixed_size", "group", 0, 32, "all"), ("private_segment_fixed_size", "private", 0, 32, "all"),
  ("kernarg_size", "kernarg", 0, 32, "all"), ("kernel_code_entry_byte_offset", "entry", 0, 64, "all"),
  # COMPUTE_PGM_RSRC1
  ("granulated_workitem_vgpr_count", "rsrc1", 0, 6, "all"), ("granulated_wavefront_sgpr_count", "rsrc1", 6, 4, "all"),
  ("priority", "rsrc1", 10, 2, "all"), ("float_round_mode_32", "rsrc1", 12, 2, "all"),
  ("float_round_mode_16_64", "rsrc1", 14, 2, "all"), ("float_denorm_mode_32", "rsrc1", 16, 2, "all"),
  ("float_denorm_mode_16_64", "rsrc1", 18, 2, "all"), ("priv", "rsrc1", 20, 1, "all"),
  ("enable_dx10_clamp", "rsrc1", 21, 1, "gfx6-11"), ("enable_wg_rr_en", "rsrc1", 21, 1, "gfx12+"),
  ("debug_mode", "rsrc1", 22, 1, "all"), ("enable_ieee_mode", "rsrc1", 23, 1, "gfx6-11"),
  ("bulky", "rsrc1", 24, 1, "all"), ("cdbg_user", "rsrc1", 25, 1, "all"), ("fp16_ovfl", "rsrc1", 26, 1, "gfx9+"),
  ("wgp_mode", "rsrc1", 29, 1, "gfx10+"), ("mem_ordered", "rsrc1", 30, 1, "gfx10+"),
  ("fwd_progress", "rsrc1", 31, 1, "gfx10+"),
  # COMPUTE_PGM_RSRC2
  ("enable_private_segment", "rsrc2", 0, 1, "all"), ("user_sgpr_count", "rsrc2", 1, 5, "all"),
  ("enable_trap_handler", "rsrc2", 6, 1, "all"), ("enable_sgpr_workgroup_id_x", "rsrc2", 7, 1, "all"),
  ("enable_sgpr_workgroup_id_y", "rsrc2", 8, 1, "all"), ("enable_sgpr_workgroup_id_z", "rsrc2", 9, 1, "all"),
  ("enable_sgpr_workgroup_info", "rsrc2", 10, 1, "all"), ("enable_vgpr_workitem_id", "rsrc2", 11, 2, "all"),
  ("enable_exception_address_watch", "rsrc2", 13, 1, "all"), ("enable_exception_memory", "rsrc2", 14, 1, "all"),
  ("granulated_lds_size", "rsrc2", 15, 9, "all"),
  ("enable_exception_ieee_754_fp_invalid_operation", "rsrc2", 24, 1, "all"),
  ("enable_exception_fp_denormal_source", "rsrc2", 25, 1, "all"),
  ("enable_exception_ieee_754_fp_division_by_zero", "rsrc2", 26, 1, "all"),
  ("enable_exception_ieee_754_fp_overflow", "rsrc2", 27, 1, "all"),
  ("enable_exception_ieee_754_fp_underflow", "rsrc2", 28, 1, "all"),
  ("enable_exception_ieee_754_fp_inexact", "rsrc2", 29, 1, "all"),
  ("enable_exception_int_divide_by_zero", "rsrc2", 30, 1, "all"),
  # COMPUTE_PGM_RSRC3 (different per family)
  ("accum_offset", "rsrc3", 0, 6, "gfx90a"), ("tg_split", "rsrc3", 16, 1, "gfx90a"),
  ("shared_vgpr_count", "rsrc3", 0, 4, "gfx10-11"), ("inst_pref_size", "rsrc3", 4, 6, "gfx11"),
  ("inst_pref_size", "rsrc3", 4, 8, "gfx12+"), ("trap_on_start", "rsrc3", 10, 1, "gfx11"),
  ("trap_on_end", "rsrc3", 11, 1, "gfx11"), ("glg_en", "rsrc3", 12, 1, "gfx12+"),
  ("image_op", "rsrc3", 31, 1, "gfx11+"),
  # kernel_code_properties
  ("enable_sgpr_private_segment_buffer", "kcp", 0, 1, "all"), ("enable_sgpr_dispatch_ptr", "kcp", 1, 1, "all"),
  ("enable_sgpr_queue_ptr", "kcp", 2, 1, "all"), ("enable_sgpr_kernarg_segment_ptr", "kcp", 3, 1, "all"),
  ("enable_sgpr_dispatch_id", "kcp", 4, 1, "all"), ("enable_sgpr_flat_scratch_init", "kcp", 5, 1, "all"),
  ("enable_sgpr_private_segment_size", "kcp", 6, 1, "all"), ("enable_wavefront_size32", "kcp", 10, 1, "gfx10+"),
  ("uses_dynamic_stack", "kcp", 11, 1, "all"),
  # kernarg_preload
  ("kernarg_preload_spec_length", "preload", 0, 7, "gfx90a"),
  ("kernarg_preload_spec_offset", "preload", 7, 9, "gfx90a"),
]

# User SGPRs in the order the ABI loads them (AMDGPUUsage "Initial Kernel Execution State"), with their sizes.
USER_SGPRS = (("private_segment_buffer", 4), ("dispatch_ptr", 2), ("queue_ptr", 2), ("kernarg_segment_ptr", 2),
              ("dispatch_id", 2), ("flat_scratch_init", 2), ("private_segment_size", 1))


def _fields(t: Target) -> list[tuple[str, str, int, int]]:
  return [(n, w, s, b) for n, w, s, b, on in _F if _ON[on](t)]


@dataclass(frozen=True)
class KernelDescriptor:
  """A decoded kernel descriptor. Every bit field is an int attribute named as in AMDGPUUsage (lower case);
  fields a target lacks read 0. Derived counts are properties. `decode`/`encode` are exact inverses."""
  arch: str
  group_segment_fixed_size: int = 0
  private_segment_fixed_size: int = 0
  kernarg_size: int = 0
  kernel_code_entry_byte_offset: int = 0
  granulated_workitem_vgpr_count: int = 0
  granulated_wavefront_sgpr_count: int = 0
  priority: int = 0
  float_round_mode_32: int = 0
  float_round_mode_16_64: int = 0
  float_denorm_mode_32: int = 0
  float_denorm_mode_16_64: int = 0
  priv: int = 0
  enable_dx10_clamp: int = 0
  enable_wg_rr_en: int = 0
  debug_mode: int = 0
  enable_ieee_mode: int = 0
  bulky: int = 0
  cdbg_user: int = 0
  fp16_ovfl: int = 0
  wgp_mode: int = 0
  mem_ordered: int = 0
  fwd_progress: int = 0
  enable_private_segment: int = 0
  user_sgpr_count: int = 0
  enable_trap_handler: int = 0
  enable_sgpr_workgroup_id_x: int = 0
  enable_sgpr_workgroup_id_y: int = 0
  enable_sgpr_workgroup_id_z: int = 0
  enable_sgpr_workgroup_info: int = 0
  enable_vgpr_workitem_id: int = 0
  enable_exception_address_watch: int = 0
  enable_exception_memory: int = 0
  granulated_lds_size: int = 0
  enable_exception_ieee_754_fp_invalid_operation: int = 0
  enable_exception_fp_denormal_source: int = 0
  enable_exception_ieee_754_fp_division_by_zero: int = 0
  enable_exception_ieee_754_fp_overflow: int = 0
  enable_exception_ieee_754_fp_underflow: int = 0
  enable_exception_ieee_754_fp_inexact: int = 0
  enable_exception_int_divide_by_zero: int = 0
  accum_offset: int = 0
  tg_split: int = 0
  shared_vgpr_count: int = 0
  inst_pref_size: int = 0
  trap_on_start: int = 0
  trap_on_end: int = 0
  glg_en: int = 0
  image_op: int = 0
  enable_sgpr_private_segment_buffer: int = 0
  enable_sgpr_dispatch_ptr: int = 0
  enable_sgpr_queue_ptr: int = 0
  enable_sgpr_kernarg_segment_ptr: int = 0
  enable_sgpr_dispatch_id: int = 0
  enable_sgpr_flat_scratch_init: int = 0
  enable_sgpr_private_segment_size: int = 0
  enable_wavefront_size32: int = 0
  uses_dynamic_stack: int = 0
  kernarg_preload_spec_length: int = 0
  kernarg_preload_spec_offset: int = 0

  @classmethod
  def decode(cls, raw: bytes, arch: str) -> KernelDescriptor:
    if len(raw) != KD_SIZE: raise CodeObjectError(f"kernel descriptor is {len(raw)} bytes, expected {KD_SIZE}")
    vals = {}
    for name, word, shift, width in _fields(target(arch)):
      off, size = _WORDS[word]
      w = int.from_bytes(raw[off:off + size], "little", signed=word == "entry")
      vals[name] = w if width == size * 8 else (w >> shift) & ((1 << width) - 1)
    return cls(arch=arch, **vals)

  def encode(self) -> bytes:
    raw = bytearray(KD_SIZE)
    for name, word, shift, width in _fields(target(self.arch)):
      v, off, size = getattr(self, name), *_WORDS[word]
      lo = -(1 << (width - 1)) if word == "entry" else 0
      if not lo <= v < (1 << width) + lo:
        raise CodeObjectError(f"[{self.arch}] {name}={v} does not fit in {width} bits")
      w = int.from_bytes(raw[off:off + size], "little") | ((v & ((1 << width) - 1)) << shift)
      raw[off:off + size] = w.to_bytes(size, "little")
    return bytes(raw)

  def replace(self, **kw) -> KernelDescriptor:
    return dataclasses.replace(self, **kw)

  @property
  def target(self) -> Target: return target(self.arch)
  @property
  def wave_size(self) -> int: return 32 if self.enable_wavefront_size32 else 64
  @property
  def vgpr_granule(self) -> int: return 8 if self.target.gfx90a or self.wave_size == 32 else 4

  @property
  def vgpr_count(self) -> int:
    """VGPRs allocated per lane (on gfx90a-style targets: VGPRs and AccVGPRs together)."""
    return (self.granulated_workitem_vgpr_count + 1) * self.vgpr_granule

  @property
  def sgpr_count(self) -> int:
    """SGPRs allocated per wave: from the KD on gfx9 (incl. VCC/FLAT_SCRATCH/XNACK_MASK); fixed 128 on gfx10+."""
    return 128 if self.target.major >= 10 else (self.granulated_wavefront_sgpr_count + 1) * 8

  @property
  def accum_offset_vgprs(self) -> int | None:
    """First AccVGPR index in the unified register file (gfx90a-style targets), else None."""
    return (self.accum_offset + 1) * 4 if self.target.gfx90a else None

  @property
  def workgroup_id_enables(self) -> tuple[bool, bool, bool]:
    return tuple(bool(getattr(self, f"enable_sgpr_workgroup_id_{c}")) for c in "xyz")

  def vgpr_layout(self) -> list[tuple[str, int, int, int]]:
    """Initial work-item id VGPRs as (what, VGPR, first bit, bits): packed into v0 (x: 0-9, y: 10-19, z: 20-29) on
    targets with packed work-item ids, else v0/v1/v2; how many follows enable_vgpr_workitem_id (0: x, 1: xy, 2: xyz)."""
    dims = "xyz"[:min(self.enable_vgpr_workitem_id, 2) + 1]
    if self.target.packed_tid: return [(f"workitem_id_{d}", 0, 10 * i, 10) for i, d in enumerate(dims)]
    return [(f"workitem_id_{d}", i, 0, 32) for i, d in enumerate(dims)]

  def sgpr_layout(self) -> list[tuple[str, int, int]]:
    """Initial SGPRs the hardware loads, as (what, first SGPR, count): enabled user SGPRs in ABI order, preloaded
    kernargs, then from `user_sgpr_count` on the system SGPRs (workgroup ids, workgroup info, scratch wave offset)."""
    out, n = [], 0
    for name, size in USER_SGPRS:
      if getattr(self, f"enable_sgpr_{name}"): out.append((name, n, size)); n += size
    if self.kernarg_preload_spec_length: out.append(("kernarg_preload", n, self.kernarg_preload_spec_length))
    n = self.user_sgpr_count
    for name in ("workgroup_id_x", "workgroup_id_y", "workgroup_id_z", "workgroup_info"):
      if getattr(self, f"enable_sgpr_{name}"): out.append((name, n, 1)); n += 1
    if self.enable_private_segment: out.append(("private_segment_wavefront_offset", n, 1))
    return out


FIELD_NAMES = tuple(f.name for f in dataclasses.fields(KernelDescriptor) if f.name != "arch")


# ---------------------------------------------------------------------------------------------------------------
# `.amdhsa_kernel` directives.  directive (without ".amdhsa_") -> (KD field or None when computed, where).
# "no_archfs" directives are rejected on targets with architected flat scratch, which all our targets have.
_D = {
  "group_segment_fixed_size": ("group_segment_fixed_size", "all"),
  "private_segment_fixed_size": ("private_segment_fixed_size", "all"),
  "kernarg_size": ("kernarg_size", "all"),
  "user_sgpr_count": (None, "all"),
  "user_sgpr_private_segment_buffer": ("enable_sgpr_private_segment_buffer", "no_archfs"),
  "user_sgpr_dispatch_ptr": ("enable_sgpr_dispatch_ptr", "all"),
  "user_sgpr_queue_ptr": ("enable_sgpr_queue_ptr", "all"),
  "user_sgpr_kernarg_segment_ptr": ("enable_sgpr_kernarg_segment_ptr", "all"),
  "user_sgpr_dispatch_id": ("enable_sgpr_dispatch_id", "all"),
  "user_sgpr_flat_scratch_init": ("enable_sgpr_flat_scratch_init", "no_archfs"),
  "user_sgpr_private_segment_size": ("enable_sgpr_private_segment_size", "all"),
  "user_sgpr_kernarg_preload_length": ("kernarg_preload_spec_length", "gfx90a"),
  "user_sgpr_kernarg_preload_offset": ("kernarg_preload_spec_offset", "gfx90a"),
  "wavefront_size32": ("enable_wavefront_size32", "gfx10+"),
  "uses_dynamic_stack": ("uses_dynamic_stack", "all"),
  "system_sgpr_private_segment_wavefront_offset": ("enable_private_segment", "no_archfs"),
  "enable_private_segment": ("enable_private_segment", "all"),
  "system_sgpr_workgroup_id_x": ("enable_sgpr_workgroup_id_x", "all"),
  "system_sgpr_workgroup_id_y": ("enable_sgpr_workgroup_id_y", "all"),
  "system_sgpr_workgroup_id_z": ("enable_sgpr_workgroup_id_z", "all"),
  "system_sgpr_workgroup_info": ("enable_sgpr_workgroup_info", "all"),
  "system_vgpr_workitem_id": ("enable_vgpr_workitem_id", "all"),
  "next_free_vgpr": (None, "all"), "next_free_sgpr": (None, "all"), "accum_offset": (None, "gfx90a"),
  "reserve_vcc": (None, "all"), "reserve_flat_scratch": (None, "no_archfs"), "reserve_xnack_mask": (None, "all"),
  "float_round_mode_32": ("float_round_mode_32", "all"), "float_round_mode_16_64": ("float_round_mode_16_64", "all"),
  "float_denorm_mode_32": ("float_denorm_mode_32", "all"),
  "float_denorm_mode_16_64": ("float_denorm_mode_16_64", "all"),
  "dx10_clamp": ("enable_dx10_clamp", "gfx6-11"), "ieee_mode": ("enable_ieee_mode", "gfx6-11"),
  "fp16_overflow": ("fp16_ovfl", "gfx9+"), "tg_split": ("tg_split", "gfx90a"),
  "workgroup_processor_mode": ("wgp_mode", "gfx10+"), "memory_ordered": ("mem_ordered", "gfx10+"),
  "forward_progress": ("fwd_progress", "gfx10+"), "shared_vgpr_count": ("shared_vgpr_count", "gfx10-11"),
  "inst_pref_size": ("inst_pref_size", "gfx11+"), "round_robin_scheduling": ("enable_wg_rr_en", "gfx12+"),
  "exception_fp_ieee_invalid_op": ("enable_exception_ieee_754_fp_invalid_operation", "all"),
  "exception_fp_denorm_src": ("enable_exception_fp_denormal_source", "all"),
  "exception_fp_ieee_div_zero": ("enable_exception_ieee_754_fp_division_by_zero", "all"),
  "exception_fp_ieee_overflow": ("enable_exception_ieee_754_fp_overflow", "all"),
  "exception_fp_ieee_underflow": ("enable_exception_ieee_754_fp_underflow", "all"),
  "exception_fp_ieee_inexact": ("enable_exception_ieee_754_fp_inexact", "all"),
  "exception_int_div_zero": ("enable_exception_int_divide_by_zero", "all"),
}
DIRECTIVES = tuple(f".amdhsa_{d}" for d in _D)
DIRECTIVE_FIELD = {f".amdhsa_{d}": f for d, (f, _) in _D.items() if f}   # directive -> the KD field it sets
_WHY = {"gfx90a": "directive requires gfx90a+", "gfx10+": "directive requires gfx10+",
        "gfx10-11": "directive requires gfx10 or gfx11", "gfx11+": "directive requires gfx11+",
        "gfx12+": "directive requires gfx12+", "gfx6-11": "directive unsupported on gfx12+",
        "no_archfs": "directive is not supported with architected flat scratch"}
_WIDTH = {n: w for n, _, _, w, _ in _F}
_WIDTH.update(group_segment_fixed_size=32, private_segment_fixed_size=32, kernarg_size=32)


def default_kd(arch: str, wave: int) -> KernelDescriptor:
  """The descriptor llvm-mc-22 starts from before applying a block's directives."""
  t = target(arch)
  kw = dict(float_denorm_mode_16_64=3, enable_sgpr_workgroup_id_x=1)
  if t.major <= 11: kw.update(enable_dx10_clamp=1, enable_ieee_mode=1)
  if t.major >= 10: kw.update(wgp_mode=1, mem_ordered=1, fwd_progress=1, enable_wavefront_size32=int(wave == 32))
  return KernelDescriptor(arch=arch, **kw)


def kd_from_directives(name: str, directives: list[tuple[str, int, int]], arch: str, *, wave: int | None = None,
                       xnack: str = "any") -> KernelDescriptor:
  """Build the descriptor of `.amdhsa_kernel name` from its (directive, value, line) list, with llvm-mc-22's defaults,
  granules and checks. `wave` is the default wave size; `.amdhsa_wavefront_size32` overrides it, as in llvm-mc-22.
  `kernel_code_entry_byte_offset` is left 0 for the writer to fill in.
  `xnack` is the target-id setting ("on", "off", "any"); it decides the default of `.amdhsa_reserve_xnack_mask`."""
  t = target(arch)
  wave = wave or (64 if t.wave64_only or t.major < 10 else 32)

  def err(msg: str, line: int) -> CodeObjectError:
    return CodeObjectError(f"[{arch}] .amdhsa_kernel {name}: line {line}: {msg}", kernel=name, line=line)

  kd, seen = default_kd(arch, wave), {}
  for d, v, line in directives:
    key = d.removeprefix(".amdhsa_")
    if key not in _D: raise err(f"unknown .amdhsa_kernel directive {d}", line)
    if key in seen: raise err(f"{d} directive cannot be repeated (first at line {seen[key][1]})", line)
    field, on = _D[key]
    if on == "no_archfs" or not _ON[on](t): raise err(_WHY[on], line)
    width = _WIDTH[field] if field else 1 if key.startswith("reserve_") else 5 if key == "user_sgpr_count" else 32
    if not 0 <= v < (1 << width) or (key == "user_sgpr_kernarg_preload_length" and v > 16):
      raise err(f"{d} value {v} out of range", line)
    seen[key] = (v, line)
    if field: kd = kd.replace(**{field: v})
  get = lambda k, default: seen[k][0] if k in seen else default
  at = lambda k: seen[k][1] if k in seen else 0
  for req in ("next_free_vgpr", "next_free_sgpr") + (("accum_offset",) if t.gfx90a else ()):
    if req not in seen: raise err(f".amdhsa_{req} directive is required", 0)
  if "reserve_xnack_mask" in seen and t.xnack and seen["reserve_xnack_mask"][0] != (xnack != "off"):
    raise err(".amdhsa_reserve_xnack_mask does not match target id", at("reserve_xnack_mask"))

  # VGPRs: one granule of encoding per 8 (gfx90a-style or wave32) or 4 (wave64) registers, minus one.
  nvgpr, max_vgpr = get("next_free_vgpr", 0), 512 if t.gfx90a else 256
  if nvgpr > max_vgpr: raise err(f"too many VGPR registers ({nvgpr} > {max_vgpr})", at("next_free_vgpr"))
  kd = kd.replace(granulated_workitem_vgpr_count=-(-max(1, nvgpr) // kd.vgpr_granule) - 1)
  if t.gfx90a:
    acc = seen["accum_offset"][0]
    if not 4 <= acc <= 256 or acc % 4: raise err("accum_offset should be in range [4..256] in increments of 4",
                                                 at("accum_offset"))
    if acc > -(-max(1, nvgpr) // 4) * 4: raise err("accum_offset exceeds total VGPR allocation", at("accum_offset"))
    kd = kd.replace(accum_offset=acc // 4 - 1)
  if t.major in (10, 11) and kd.shared_vgpr_count * 2 + kd.granulated_workitem_vgpr_count > 63:
    raise err("shared_vgpr_count*2 + compute_pgm_rsrc1.GRANULATED_WORKITEM_VGPR_COUNT cannot exceed 63",
              at("shared_vgpr_count"))

  implied = sum(n for u, n in USER_SGPRS if getattr(kd, f"enable_sgpr_{u}")) + kd.kernarg_preload_spec_length
  count = get("user_sgpr_count", implied)
  if count < implied: raise err("amdgpu_user_sgpr_count smaller than than implied by enabled user SGPRs",
                                at("user_sgpr_count"))
  if count > 31: raise err(f"too many user SGPRs enabled ({count} > 31)", at("user_sgpr_count"))
  # SGPRs: only gfx9 encodes a count: next_free_sgpr plus the trailing VCC/XNACK_MASK/FLAT_SCRATCH block (which
  # overlap, so the largest wins), in granules of 8, minus one. Our gfx9 targets (gfx942/gfx950) have architected
  # flat scratch, which always reserves the whole 6-SGPR block whatever .amdhsa_reserve_vcc/xnack_mask say.
  # With kernarg preloading, llvm-mc-22 counts all user SGPRs as used (seen in its output, not documented).
  nsgpr, max_sgpr = get("next_free_sgpr", 0), 102 if t.major < 10 else 106
  if nsgpr > max_sgpr: raise err(f"too many SGPR registers ({nsgpr} > {max_sgpr})", at("next_free_sgpr"))
  if t.major < 10:
    used = max(nsgpr, count if kd.kernarg_preload_spec_length else 0) + 6
    kd = kd.replace(granulated_wavefront_sgpr_count=-(-max(1, used) // 8) - 1)
  return kd.replace(user_sgpr_count=count)
