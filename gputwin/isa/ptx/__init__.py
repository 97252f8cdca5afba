"""PTX ISA layer: parse nvcc's PTX (ISA 9.0) into typed dataclasses, check each instruction against our form
table, print it back. Entry points: `parse(text, path)`, `format_ptx(module)`, `forms` (the table: lookup/check)."""
from gputwin.isa.ptx import forms
from gputwin.isa.ptx.model import (Addr, Args, BranchTargets, Function, Guard, Imm, Instruction, Label, LabelDef, Loc,
                                   Module, Pair, Pos, Pragma, Prototype, Reg, RegDecl, Scope, Section, Sym, VarDecl,
                                   Vec)
from gputwin.isa.ptx.parser import PtxError, parse
from gputwin.isa.ptx.printer import format_ptx

Module.__str__ = format_ptx  # str(module) is its PTX text (set here: printer.py imports model.py)

__all__ = ["parse", "format_ptx", "forms", "PtxError", "Module", "Function", "Instruction", "RegDecl", "VarDecl",
           "Reg", "Imm", "Sym", "Label", "Vec", "Addr", "Pair", "Args", "Guard", "Loc", "Pos", "LabelDef",
           "BranchTargets", "Prototype", "Pragma", "Scope", "Section"]
