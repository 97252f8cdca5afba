; The per-wave work of the register checkers around a native block (gputwin/emu/checks.py, Checks.native and
; Checks.ran), as host code over the checkers' numpy tables: one call per block run instead of a numpy operation per
; register and counter (each ~2 us however few the waves). Loaded once per process (native/tier.py `support`).
;
; st (i64): [W, ws v, ws a, ws s, ps v, ps a, ps s, issued, retired], the tables' addresses, all register- or
; counter-major with rows of W waves: written flag (u8) of register r of wave w at ws[f] + r*W + w; the pending load
; of it (i32 pair: counter + 1 or 0, sequence number) at ps[f] + 8*(r*W + w); issued and retired counts (i64) of
; counter c at + 8*(c*W + w). Files f: 0 v, 1 a, 2 s.
;
; sum (i64), a block's _Summary as records: [n_ex, n_ld, n_wait, n_wrote, n_plain, n_loaded, nc], inc[nc], then
;   ex     (f, lo, n)        an operand read before the block writes it: some register lo..lo+n-1 must be written
;   ld     (f, r, K[nc])     a register read before the block writes it: its pending load must have retired by
;                            max(retired[c], issued[c] + K[c]) at entry (K: the block's waits before the read)
;   wait   (c, k)            at the end: retired[c] = max(retired[c], issued[c] at entry + k)
;   wrote  (f, r)            at the end: written
;   plain  (f, r)            at the end: no load pending (a non-load wrote it last)
;   loaded (f, r, c, a)      at the end: pending on the load (c + 1, issued[c] at entry + a)
; and issued[c] += inc[c]. checks: bit 0 uninit (ex), bit 1 waitcnt (ld, plain, loaded). Each record walks the
; waves (waves[0..nw), int64) in its inner loop: a batch's rows are then read and written in order.

define i64 @enter(ptr %sum, ptr %st, ptr %waves, i64 %nw, i64 %checks) {
entry:
  %W = load i64, ptr %st
  %nex = load i64, ptr %sum
  %nldp = getelementptr i64, ptr %sum, i64 1
  %nld = load i64, ptr %nldp
  %ncp = getelementptr i64, ptr %sum, i64 6
  %nc = load i64, ptr %ncp
  %ex0 = add i64 %nc, 7
  %ex3 = mul i64 %nex, 3
  %ld0 = add i64 %ex0, %ex3
  %ldw = add i64 %nc, 2
  %u = and i64 %checks, 1
  %uon = icmp ne i64 %u, 0
  %nexu = select i1 %uon, i64 %nex, i64 0
  %wc = and i64 %checks, 2
  %won = icmp ne i64 %wc, 0
  %nldu = select i1 %won, i64 %nld, i64 0
  %isp = getelementptr i64, ptr %st, i64 7
  %isi = load i64, ptr %isp
  %is = inttoptr i64 %isi to ptr
  %rtp = getelementptr i64, ptr %st, i64 8
  %rti = load i64, ptr %rtp
  %rt = inttoptr i64 %rti to ptr
  br label %ehead
ehead:  ; every exposed operand: in every wave, some register of it written
  %e = phi i64 [0, %entry], [%e.n, %ewend]
  %emore = icmp ult i64 %e, %nexu
  br i1 %emore, label %ebody, label %lhead
ebody:
  %e3 = mul i64 %e, 3
  %eo = add i64 %ex0, %e3
  %efp = getelementptr i64, ptr %sum, i64 %eo
  %ef = load i64, ptr %efp
  %elop = getelementptr i64, ptr %efp, i64 1
  %elo = load i64, ptr %elop
  %enp = getelementptr i64, ptr %efp, i64 2
  %en = load i64, ptr %enp
  %ebi = add i64 %ef, 1
  %ebp = getelementptr i64, ptr %st, i64 %ebi
  %ebase = load i64, ptr %ebp
  %eb = inttoptr i64 %ebase to ptr
  br label %ewhead
ewhead:
  %j = phi i64 [0, %ebody], [%j.n, %efound]
  %ewmore = icmp ult i64 %j, %nw
  br i1 %ewmore, label %ewbody, label %ewend
ewbody:
  %wp = getelementptr i64, ptr %waves, i64 %j
  %w = load i64, ptr %wp
  br label %rhead
rhead:
  %i = phi i64 [0, %ewbody], [%i.n, %rnext]
  %rmore = icmp ult i64 %i, %en
  br i1 %rmore, label %rbody, label %fail
rbody:
  %r = add i64 %elo, %i
  %rW = mul i64 %r, %W
  %rw = add i64 %rW, %w
  %flagp = getelementptr i8, ptr %eb, i64 %rw
  %flag = load i8, ptr %flagp
  %set = icmp ne i8 %flag, 0
  br i1 %set, label %efound, label %rnext
rnext:
  %i.n = add i64 %i, 1
  br label %rhead
efound:
  %j.n = add i64 %j, 1
  br label %ewhead
ewend:
  %e.n = add i64 %e, 1
  br label %ehead
lhead:  ; every register read before the block writes it: in every wave, its pending load retired
  %d = phi i64 [0, %ehead], [%d.n, %lwend]
  %lmore = icmp ult i64 %d, %nldu
  br i1 %lmore, label %lbody, label %pass
lbody:
  %dw = mul i64 %d, %ldw
  %do = add i64 %ld0, %dw
  %dfp = getelementptr i64, ptr %sum, i64 %do
  %df = load i64, ptr %dfp
  %drp = getelementptr i64, ptr %dfp, i64 1
  %dr = load i64, ptr %drp
  %dbi = add i64 %df, 4
  %dbp = getelementptr i64, ptr %st, i64 %dbi
  %dbase = load i64, ptr %dbp
  %db = inttoptr i64 %dbase to ptr
  %drW = mul i64 %dr, %W
  %kp = getelementptr i64, ptr %dfp, i64 2
  br label %lwhead
lwhead:
  %q = phi i64 [0, %lbody], [%q.n, %lnext]
  %lwmore = icmp ult i64 %q, %nw
  br i1 %lwmore, label %lwbody, label %lwend
lwbody:
  %qp = getelementptr i64, ptr %waves, i64 %q
  %qw = load i64, ptr %qp
  %drw = add i64 %drW, %qw
  %dq = shl i64 %drw, 1
  %c1p = getelementptr i32, ptr %db, i64 %dq
  %c1 = load i32, ptr %c1p
  %pending = icmp sgt i32 %c1, 0
  br i1 %pending, label %lcheck, label %lnext
lcheck:
  %seqp = getelementptr i32, ptr %c1p, i64 1
  %seq32 = load i32, ptr %seqp
  %c32 = sub i32 %c1, 1
  %c = sext i32 %c32 to i64
  %cW = mul i64 %c, %W
  %cw = add i64 %cW, %qw
  %rcp = getelementptr i64, ptr %rt, i64 %cw
  %ret0 = load i64, ptr %rcp
  %icp = getelementptr i64, ptr %is, i64 %cw
  %iss = load i64, ptr %icp
  %kcp = getelementptr i64, ptr %kp, i64 %c
  %k = load i64, ptr %kcp
  %ik = add i64 %iss, %k
  %ret = call i64 @llvm.smax.i64(i64 %ret0, i64 %ik)
  %seq = sext i32 %seq32 to i64
  %late = icmp sgt i64 %seq, %ret
  br i1 %late, label %fail, label %lnext
lnext:
  %q.n = add i64 %q, 1
  br label %lwhead
lwend:
  %d.n = add i64 %d, 1
  br label %lhead
pass:
  ret i64 1
fail:
  ret i64 0
}

define void @leave(ptr %sum, ptr %st, ptr %waves, i64 %nw, i64 %checks) {
entry:
  %W = load i64, ptr %st
  %nex = load i64, ptr %sum
  %nldp = getelementptr i64, ptr %sum, i64 1
  %nld = load i64, ptr %nldp
  %nwaitp = getelementptr i64, ptr %sum, i64 2
  %nwait = load i64, ptr %nwaitp
  %nwrotep = getelementptr i64, ptr %sum, i64 3
  %nwrote = load i64, ptr %nwrotep
  %nplainp = getelementptr i64, ptr %sum, i64 4
  %nplain0 = load i64, ptr %nplainp
  %nloadedp = getelementptr i64, ptr %sum, i64 5
  %nloaded0 = load i64, ptr %nloadedp
  %ncp = getelementptr i64, ptr %sum, i64 6
  %nc = load i64, ptr %ncp
  %wc = and i64 %checks, 2
  %won = icmp ne i64 %wc, 0
  %nplain = select i1 %won, i64 %nplain0, i64 0
  %nloaded = select i1 %won, i64 %nloaded0, i64 0
  ; record offsets: inc at 7, then ex (3), ld (nc + 2), wait (2), wrote (2), plain (2), loaded (4)
  %ex3 = mul i64 %nex, 3
  %ldw = add i64 %nc, 2
  %ldn = mul i64 %nld, %ldw
  %ex0 = add i64 %nc, 7
  %ld0 = add i64 %ex0, %ex3
  %wt0 = add i64 %ld0, %ldn
  %wt2 = shl i64 %nwait, 1
  %wr0 = add i64 %wt0, %wt2
  %wr2 = shl i64 %nwrote, 1
  %pl0 = add i64 %wr0, %wr2
  %pl2 = shl i64 %nplain0, 1
  %lo0 = add i64 %pl0, %pl2
  %isp = getelementptr i64, ptr %st, i64 7
  %isi = load i64, ptr %isp
  %is = inttoptr i64 %isi to ptr
  %rtp = getelementptr i64, ptr %st, i64 8
  %rti = load i64, ptr %rtp
  %rt = inttoptr i64 %rti to ptr
  br label %thead
thead:  ; waits: retired[c] = max(retired[c], issued[c] at entry + k)
  %t = phi i64 [0, %entry], [%t.n, %twend]
  %tmore = icmp ult i64 %t, %nwait
  br i1 %tmore, label %tbody, label %lohead
tbody:
  %t2 = shl i64 %t, 1
  %to = add i64 %wt0, %t2
  %tcp = getelementptr i64, ptr %sum, i64 %to
  %tc = load i64, ptr %tcp
  %tkp = getelementptr i64, ptr %tcp, i64 1
  %tk = load i64, ptr %tkp
  %tcW = mul i64 %tc, %W
  %trow = getelementptr i64, ptr %rt, i64 %tcW
  %tirow = getelementptr i64, ptr %is, i64 %tcW
  br label %twhead
twhead:
  %tj = phi i64 [0, %tbody], [%tj.n, %twbody]
  %twmore = icmp ult i64 %tj, %nw
  br i1 %twmore, label %twbody, label %twend
twbody:
  %twp = getelementptr i64, ptr %waves, i64 %tj
  %tw = load i64, ptr %twp
  %trp = getelementptr i64, ptr %trow, i64 %tw
  %tr = load i64, ptr %trp
  %tip = getelementptr i64, ptr %tirow, i64 %tw
  %ti = load i64, ptr %tip
  %tik = add i64 %ti, %tk
  %tnew = call i64 @llvm.smax.i64(i64 %tr, i64 %tik)
  store i64 %tnew, ptr %trp
  %tj.n = add i64 %tj, 1
  br label %twhead
twend:
  %t.n = add i64 %t, 1
  br label %thead
lohead:  ; loaded: pending on the block's load (issued at entry + its issue number)
  %o = phi i64 [0, %thead], [%o.n, %lowend]
  %omore = icmp ult i64 %o, %nloaded
  br i1 %omore, label %lobody, label %plhead
lobody:
  %o4 = shl i64 %o, 2
  %oo = add i64 %lo0, %o4
  %ofp = getelementptr i64, ptr %sum, i64 %oo
  %of = load i64, ptr %ofp
  %orp = getelementptr i64, ptr %ofp, i64 1
  %or = load i64, ptr %orp
  %ocp = getelementptr i64, ptr %ofp, i64 2
  %oc = load i64, ptr %ocp
  %oap = getelementptr i64, ptr %ofp, i64 3
  %oa = load i64, ptr %oap
  %obi = add i64 %of, 4
  %obp = getelementptr i64, ptr %st, i64 %obi
  %obase = load i64, ptr %obp
  %ob = inttoptr i64 %obase to ptr
  %ocW = mul i64 %oc, %W
  %oirow = getelementptr i64, ptr %is, i64 %ocW
  %oc1 = add i64 %oc, 1
  %oc132 = trunc i64 %oc1 to i32
  %orW = mul i64 %or, %W
  %orW2 = shl i64 %orW, 1
  %orow = getelementptr i32, ptr %ob, i64 %orW2
  br label %lowhead
lowhead:
  %oj = phi i64 [0, %lobody], [%oj.n, %lowbody]
  %lowmore = icmp ult i64 %oj, %nw
  br i1 %lowmore, label %lowbody, label %lowend
lowbody:
  %owp = getelementptr i64, ptr %waves, i64 %oj
  %ow = load i64, ptr %owp
  %oip = getelementptr i64, ptr %oirow, i64 %ow
  %oi = load i64, ptr %oip
  %oseq = add i64 %oi, %oa
  %oseq32 = trunc i64 %oseq to i32
  %ow2 = shl i64 %ow, 1
  %oe = getelementptr i32, ptr %orow, i64 %ow2
  store i32 %oc132, ptr %oe
  %oe1 = getelementptr i32, ptr %oe, i64 1
  store i32 %oseq32, ptr %oe1
  %oj.n = add i64 %oj, 1
  br label %lowhead
lowend:
  %o.n = add i64 %o, 1
  br label %lohead
plhead:  ; plain: nothing pending
  %p = phi i64 [0, %lohead], [%p.n, %plwend]
  %pmore = icmp ult i64 %p, %nplain
  br i1 %pmore, label %plbody, label %wrhead
plbody:
  %p2 = shl i64 %p, 1
  %po = add i64 %pl0, %p2
  %pfp = getelementptr i64, ptr %sum, i64 %po
  %pf = load i64, ptr %pfp
  %prp = getelementptr i64, ptr %pfp, i64 1
  %pr = load i64, ptr %prp
  %pbi = add i64 %pf, 4
  %pbp = getelementptr i64, ptr %st, i64 %pbi
  %pbase = load i64, ptr %pbp
  %pb = inttoptr i64 %pbase to ptr
  %prW = mul i64 %pr, %W
  %prow = getelementptr i64, ptr %pb, i64 %prW
  br label %plwhead
plwhead:
  %pj = phi i64 [0, %plbody], [%pj.n, %plwbody]
  %plwmore = icmp ult i64 %pj, %nw
  br i1 %plwmore, label %plwbody, label %plwend
plwbody:
  %pwp = getelementptr i64, ptr %waves, i64 %pj
  %pw = load i64, ptr %pwp
  %pe = getelementptr i64, ptr %prow, i64 %pw
  store i64 0, ptr %pe, align 4
  %pj.n = add i64 %pj, 1
  br label %plwhead
plwend:
  %p.n = add i64 %p, 1
  br label %plhead
wrhead:  ; wrote: written
  %x = phi i64 [0, %plhead], [%x.n, %wrwend]
  %xmore = icmp ult i64 %x, %nwrote
  br i1 %xmore, label %wrbody, label %ihead
wrbody:
  %x2 = shl i64 %x, 1
  %xo = add i64 %wr0, %x2
  %xfp = getelementptr i64, ptr %sum, i64 %xo
  %xf = load i64, ptr %xfp
  %xrp = getelementptr i64, ptr %xfp, i64 1
  %xr = load i64, ptr %xrp
  %xbi = add i64 %xf, 1
  %xbp = getelementptr i64, ptr %st, i64 %xbi
  %xbase = load i64, ptr %xbp
  %xb = inttoptr i64 %xbase to ptr
  %xrW = mul i64 %xr, %W
  %xrow = getelementptr i8, ptr %xb, i64 %xrW
  br label %wrwhead
wrwhead:
  %xj = phi i64 [0, %wrbody], [%xj.n, %wrwbody]
  %wrwmore = icmp ult i64 %xj, %nw
  br i1 %wrwmore, label %wrwbody, label %wrwend
wrwbody:
  %xwp = getelementptr i64, ptr %waves, i64 %xj
  %xw = load i64, ptr %xwp
  %xe = getelementptr i8, ptr %xrow, i64 %xw
  store i8 1, ptr %xe
  %xj.n = add i64 %xj, 1
  br label %wrwhead
wrwend:
  %x.n = add i64 %x, 1
  br label %wrhead
ihead:  ; issued[c] += inc[c] (last: the records above read the counts at entry)
  %c = phi i64 [0, %wrhead], [%c.n, %iwend]
  %cmore = icmp ult i64 %c, %nc
  br i1 %cmore, label %ibody, label %done
ibody:
  %cio = add i64 %c, 7
  %incp = getelementptr i64, ptr %sum, i64 %cio
  %inc = load i64, ptr %incp
  %cW = mul i64 %c, %W
  %irow = getelementptr i64, ptr %is, i64 %cW
  br label %iwhead
iwhead:
  %ij = phi i64 [0, %ibody], [%ij.n, %iwbody]
  %iwmore = icmp ult i64 %ij, %nw
  br i1 %iwmore, label %iwbody, label %iwend
iwbody:
  %iwp = getelementptr i64, ptr %waves, i64 %ij
  %iw = load i64, ptr %iwp
  %icp = getelementptr i64, ptr %irow, i64 %iw
  %iv = load i64, ptr %icp
  %iv.n = add i64 %iv, %inc
  store i64 %iv.n, ptr %icp
  %ij.n = add i64 %ij, 1
  br label %iwhead
iwend:
  %c.n = add i64 %c, 1
  br label %ihead
done:
  ret void
}

declare i64 @llvm.smax.i64(i64, i64)
