; The native tier's hand-written LLVM IR, prepended to every block's module; native/runtime.py replaces the
; upper-case placeholders with ctx slot numbers, the LDS address layout, fault kinds and access tags.
; Memory helpers: global memory through a region table [start, end, host pointer], LDS through one window.
; AMD buffer lanes out of the V#'s range (codegen Gen.access, route 3): reads of zeros, writes into a sink
@nowhere_r = internal constant [256 x i8] zeroinitializer, align 16
@nowhere_w = internal global [256 x i8] zeroinitializer, align 16
define internal ptr @gm_ptr(ptr %ctx, i64 %a, i64 %nb, i64 %wr, i64 %w, ptr %hint) alwaysinline {
entry:
  %tp = getelementptr i64, ptr %ctx, i64 C_REGS
  %t = load ptr, ptr %tp, !invariant.load !0
  %end = add i64 %a, %nb
  %h = load i64, ptr %hint
  %hk = mul i64 %h, 3
  %hp = getelementptr i64, ptr %t, i64 %hk
  %hs = load i64, ptr %hp, !tbaa TB_TBL
  %hep = getelementptr i64, ptr %hp, i64 1
  %he = load i64, ptr %hep, !tbaa TB_TBL
  %hge = icmp uge i64 %a, %hs
  %hle = icmp ule i64 %end, %he
  %hlt = icmp ult i64 %a, %he
  %hin0 = and i1 %hge, %hle
  %hin = and i1 %hin0, %hlt
  br i1 %hin, label %hit, label %miss
miss:
  %found = call i1 @gm_search(ptr %ctx, i64 %a, i64 %nb, i64 %wr, i64 %w, ptr %hint)
  br i1 %found, label %again, label %bad
again:
  %h2 = load i64, ptr %hint
  %hk2 = mul i64 %h2, 3
  %hp2 = getelementptr i64, ptr %t, i64 %hk2
  %hs2 = load i64, ptr %hp2, !tbaa TB_TBL
  br label %hit
hit:
  %rp = phi ptr [%hp, %entry], [%hp2, %again]
  %rs = phi i64 [%hs, %entry], [%hs2, %again]
  %fhp = getelementptr i64, ptr %rp, i64 2
  %fh = load i64, ptr %fhp, !tbaa TB_TBL
  %foff = sub i64 %a, %rs
  %fhh = add i64 %fh, %foff
  %fr = inttoptr i64 %fhh to ptr
  ret ptr %fr
bad:
  ret ptr null
}

; the region holding [a, a + nb) into *hint, or false after recording the fault
define internal i1 @gm_search(ptr %ctx, i64 %a, i64 %nb, i64 %wr, i64 %w, ptr %hint) noinline {
entry:
  %np = getelementptr i64, ptr %ctx, i64 C_NREG
  %n = load i64, ptr %np, !invariant.load !0
  %tp = getelementptr i64, ptr %ctx, i64 C_REGS
  %t = load ptr, ptr %tp, !invariant.load !0
  %end = add i64 %a, %nb
  br label %head
head:
  %i = phi i64 [0, %entry], [%i.n, %next]
  %more = icmp slt i64 %i, %n
  br i1 %more, label %look, label %bad
look:
  %k = mul i64 %i, 3
  %sp = getelementptr i64, ptr %t, i64 %k
  %s = load i64, ptr %sp, !tbaa TB_TBL
  %ep = getelementptr i64, ptr %sp, i64 1
  %e = load i64, ptr %ep, !tbaa TB_TBL
  %ge = icmp uge i64 %a, %s
  %lt = icmp ult i64 %a, %e
  %in = and i1 %ge, %lt
  br i1 %in, label %found, label %next
next:
  %i.n = add i64 %i, 1
  br label %head
found:
  %fits = icmp ule i64 %end, %e
  br i1 %fits, label %ok, label %bad
ok:
  store i64 %i, ptr %hint
  ret i1 true
bad:
  call void @fault(ptr %ctx, i64 F_GLOBAL, i64 %a, i64 %nb, i64 %wr, i64 %w)
  ret i1 false
}

define internal void @fault(ptr %ctx, i64 %kind, i64 %a, i64 %nb, i64 %wr, i64 %w) noinline cold {
entry:
  %f0 = getelementptr i64, ptr %ctx, i64 C_FAULT
  store i64 %kind, ptr %f0, !tbaa TB_CTX
  %f1 = getelementptr i64, ptr %ctx, i64 C_FADDR
  store i64 %a, ptr %f1, !tbaa TB_CTX
  %f2 = getelementptr i64, ptr %ctx, i64 C_FBYTES
  store i64 %nb, ptr %f2, !tbaa TB_CTX
  %f3 = getelementptr i64, ptr %ctx, i64 C_FWRITE
  store i64 %wr, ptr %f3, !tbaa TB_CTX
  %f4 = getelementptr i64, ptr %ctx, i64 C_FWAVE
  store i64 %w, ptr %f4, !tbaa TB_CTX
  ret void
}

; a batch's deferred setup of wave w (Engine.pending), before its first instruction: ctx[C_INIT] points to
; [rows n, waves per workgroup, v0 template or 0, row...]: each row of the wave cleared, v0 copied from the template
define internal void @prologue(ptr %ctx, i64 %w, i64 %bytes) alwaysinline {
entry:
  %ipp = getelementptr i64, ptr %ctx, i64 C_INIT
  %ipi = load i64, ptr %ipp
  %ip = inttoptr i64 %ipi to ptr
  %n = load i64, ptr %ip
  %nwp = getelementptr i64, ptr %ip, i64 1
  %nw = load i64, ptr %nwp
  %tp = getelementptr i64, ptr %ip, i64 2
  %tpl = load i64, ptr %tp
  %vp = getelementptr i64, ptr %ctx, i64 C_V
  %v = load i64, ptr %vp
  %swp = getelementptr i64, ptr %ctx, i64 C_VSTW
  %sw = load i64, ptr %swp
  %srp = getelementptr i64, ptr %ctx, i64 C_VSTR
  %sr = load i64, ptr %srp
  %wo = mul i64 %w, %sw
  %wb = add i64 %v, %wo
  br label %head
head:
  %k = phi i64 [0, %entry], [%k.n, %body]
  %more = icmp slt i64 %k, %n
  br i1 %more, label %body, label %tail
body:
  %k3 = add i64 %k, 3
  %rp = getelementptr i64, ptr %ip, i64 %k3
  %r = load i64, ptr %rp
  %ro = mul i64 %r, %sr
  %a = add i64 %wb, %ro
  %ap = inttoptr i64 %a to ptr
  call void @llvm.memset.p0.i64(ptr %ap, i8 0, i64 %bytes, i1 false)
  %k.n = add i64 %k, 1
  br label %head
tail:
  %has = icmp ne i64 %tpl, 0
  br i1 %has, label %zero, label %done
zero:
  %q = urem i64 %w, %nw
  %qo = mul i64 %q, %bytes
  %src = add i64 %tpl, %qo
  %sp = inttoptr i64 %src to ptr
  %dp = inttoptr i64 %wb to ptr
  call void @llvm.memcpy.p0.p0.i64(ptr %dp, ptr %sp, i64 %bytes, i1 false)
  br label %done
done:
  ret void
}

define internal ptr @lds_ptr(ptr %ctx, i64 %a, i64 %nb, i64 %wr, i64 %w, ptr %hint) alwaysinline {
entry:
  %off = and i64 %a, LDS_MASK
  %szp = getelementptr i64, ptr %ctx, i64 C_LDSZ
  %sz = load i64, ptr %szp, !invariant.load !0
  %end = add i64 %off, %nb
  %bad = icmp ugt i64 %end, %sz
  br i1 %bad, label %fail, label %ok
ok:
  %slot = lshr i64 %a, LDS_SHIFT
  %base = mul i64 %slot, %sz
  %idx = add i64 %base, %off
  %bp = getelementptr i64, ptr %ctx, i64 C_LDS
  %b = load i64, ptr %bp, !invariant.load !0
  %h = add i64 %b, %idx
  %r = inttoptr i64 %h to ptr
  ret ptr %r
fail:
  call void @fault(ptr %ctx, i64 F_LDSOFF, i64 %off, i64 %nb, i64 %wr, i64 %w)
  ret ptr null
}

; the scratch window (core.Engine.run_scratch, memory.Window): address = slot << C_SCRST | offset, one slot per lane,
; C_SCRSZ bytes stored per slot; an offset past them faults as the window's check does (a slot past the last one: the
; interpreter's re-run reports it)
define internal ptr @scr_ptr(ptr %ctx, i64 %a, i64 %nb, i64 %wr, i64 %w, ptr %hint) alwaysinline {
entry:
  %shp = getelementptr i64, ptr %ctx, i64 C_SCRST
  %sh = load i64, ptr %shp, !invariant.load !0
  %szp = getelementptr i64, ptr %ctx, i64 C_SCRSZ
  %sz = load i64, ptr %szp, !invariant.load !0
  %one = shl i64 1, %sh
  %mask = sub i64 %one, 1
  %off = and i64 %a, %mask
  %end = add i64 %off, %nb
  %bad = icmp ugt i64 %end, %sz
  br i1 %bad, label %fail, label %slot
slot:
  %s = lshr i64 %a, %sh
  %np = getelementptr i64, ptr %ctx, i64 C_SCRN
  %n = load i64, ptr %np, !invariant.load !0
  %in = icmp ult i64 %s, %n
  br i1 %in, label %ok, label %past
ok:
  %base = mul i64 %s, %sz
  %idx = add i64 %base, %off
  %bp = getelementptr i64, ptr %ctx, i64 C_SCR
  %b = load i64, ptr %bp, !invariant.load !0
  %h = add i64 %b, %idx
  %r = inttoptr i64 %h to ptr
  ret ptr %r
fail:
  call void @fault(ptr %ctx, i64 F_SCROFF, i64 %off, i64 %nb, i64 %wr, i64 %w)
  ret ptr null
past:
  call void @fault(ptr %ctx, i64 F_SCRSLOT, i64 %a, i64 %nb, i64 %wr, i64 %w)
  ret ptr null
}
