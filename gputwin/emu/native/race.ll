; The LDS race checker's per-access work (gputwin/emu/checks.py, Checks._lds and _flush) on the addresses a native
; block logged, as host code over the same table: per LDS dword f (workgroup slot * nd + dword), row tab[4f..4f+3]
; (int32) holds the last writer (wave, epoch) and the last reader (wave, or -2 for many readers; epoch), the epoch
; being its workgroup's barrier count (from 1, below 2**31: a zero row, or one of an earlier epoch, is no access).
; Loaded once per process (native/tier.py `support`).
;
; One access of one instruction: waves[0..nw) in order, each wave's lanes in order; log[wave, site, lane] (uint32)
; holds the lane's LDS address (workgroup slot << shift | offset), all ones where the lane did not access. Dword k of
; every lane is walked once, lane by lane, each lane seeing the tables as the lanes before it left them: the first
; lane that races, and the tables after an access that does not, are those of the numpy version (which checks every
; lane against the tables from before the access, plus the lanes of the access itself: two waves on one dword).
;
; write 1 (a store): another wave wrote or read the dword in this epoch -> race; then lw[f] = (wave, epoch).
; write 0 (a load): another wave wrote it in this epoch -> race; then lr[f] = (-2 if another wave read it in this
;         epoch, else wave; epoch).   write 2: a queued load, entered without the check.
; Returns -1, or (position * 64 + k) of the first racing lane, position = index into waves * L + lane.
;
; A wave whose lanes access consecutive dwords of one workgroup (b32, lane 0 on, every other lane off or at lane 0's
; address + 4 * lane: a tile's row, a reduction step) takes the rows of four lanes at a time as one vector: its lanes'
; rows are distinct, so checking them all against the rows before the wave's access is the lane-by-lane walk. Any
; other wave walks its lanes one by one.

define i64 @lds_access(ptr %log, i64 %stride, i64 %site, ptr %waves, i64 %nw, i64 %L, i64 %dwords, i64 %write,
                       ptr %tab, ptr %epoch, i64 %nd, i64 %shift, i64 %mask) {
entry:  ; one copy of the walk per mode, the mode's tests folded away
  switch i64 %write, label %load [i64 1, label %store
                                   i64 2, label %queued]
store:
  %r1 = call i64 @walk(ptr %log, i64 %stride, i64 %site, ptr %waves, i64 %nw, i64 %L, i64 %dwords, i64 1,
                       ptr %tab, ptr %epoch, i64 %nd, i64 %shift, i64 %mask)
  ret i64 %r1
queued:
  %r2 = call i64 @walk(ptr %log, i64 %stride, i64 %site, ptr %waves, i64 %nw, i64 %L, i64 %dwords, i64 2,
                       ptr %tab, ptr %epoch, i64 %nd, i64 %shift, i64 %mask)
  ret i64 %r2
load:
  %r0 = call i64 @walk(ptr %log, i64 %stride, i64 %site, ptr %waves, i64 %nw, i64 %L, i64 %dwords, i64 0,
                       ptr %tab, ptr %epoch, i64 %nd, i64 %shift, i64 %mask)
  ret i64 %r0
}

define internal i64 @walk(ptr noalias %log, i64 %stride, i64 %site, ptr noalias %waves, i64 %nw, i64 %L,
                          i64 %dwords, i64 %write, ptr noalias %tab, ptr noalias %epoch, i64 %nd, i64 %shift,
                          i64 %mask) alwaysinline {
entry:
  %isw = icmp eq i64 %write, 1
  %check = icmp ne i64 %write, 2
  %half = select i1 %isw, i64 0, i64 1  ; the pair an access enters: writer (0) or reader (1)
  %one = icmp eq i64 %dwords, 1
  %L3 = and i64 %L, 3
  %L4 = icmp eq i64 %L3, 0
  %vec = and i1 %one, %L4
  %span = shl i64 %L, 2
  %span4 = sub i64 %span, 4  ; the last lane's byte offset past the first's
  br label %khead
khead:
  %k = phi i64 [0, %entry], [%k.n, %wend]
  %kmore = icmp ult i64 %k, %dwords
  br i1 %kmore, label %whead, label %ok
whead:
  %j = phi i64 [0, %khead], [%j.n, %lend]
  %wmore = icmp ult i64 %j, %nw
  br i1 %wmore, label %wbody, label %wend
wbody:
  %wp = getelementptr i64, ptr %waves, i64 %j
  %w = load i64, ptr %wp
  %w32 = trunc i64 %w to i32
  %row0 = mul i64 %w, %stride
  %row1 = add i64 %row0, %site
  %row = mul i64 %row1, %L
  %rowp = getelementptr i32, ptr %log, i64 %row
  %a0 = load i32, ptr %rowp
  %a0on = icmp ne i32 %a0, -1
  %try = and i1 %vec, %a0on
  br i1 %try, label %chead, label %vhead
chead:  ; every lane at a0 + 4 * lane, all in a0's workgroup (the last lane's address below all ones, same slot)
  %c = phi i64 [0, %wbody], [%c.n, %cbody]
  %cacc = phi <8 x i1> [zeroinitializer, %wbody], [%cacc.n, %cbody]
  %c.n = add i64 %c, 8
  %cmore = icmp ule i64 %c.n, %L
  br i1 %cmore, label %cbody, label %cend
cbody:
  %cp = getelementptr i32, ptr %rowp, i64 %c
  %cv = load <8 x i32>, ptr %cp, align 4
  %c4 = shl i64 %c, 2
  %c32 = trunc i64 %c4 to i32
  %cb = add i32 %a0, %c32
  %cbv0 = insertelement <8 x i32> poison, i32 %cb, i64 0
  %cbv = shufflevector <8 x i32> %cbv0, <8 x i32> poison, <8 x i32> zeroinitializer
  %cwant = add <8 x i32> %cbv, <i32 0, i32 4, i32 8, i32 12, i32 16, i32 20, i32 24, i32 28>
  %cne = icmp ne <8 x i32> %cv, %cwant
  %con = icmp ne <8 x i32> %cv, splat (i32 -1)
  %coff = and <8 x i1> %cne, %con
  %cacc.n = or <8 x i1> %cacc, %coff
  br label %chead
cend:  ; (lanes past the last whole eight: one by one)
  %t = phi i64 [%c, %chead], [%t.n, %tbody]
  %tacc = phi i1 [false, %chead], [%tacc.n, %tbody]
  %tmore = icmp ult i64 %t, %L
  br i1 %tmore, label %tbody, label %tend
tbody:
  %tp = getelementptr i32, ptr %rowp, i64 %t
  %tv = load i32, ptr %tp
  %t4 = shl i64 %t, 2
  %t32 = trunc i64 %t4 to i32
  %twant = add i32 %a0, %t32
  %tne = icmp ne i32 %tv, %twant
  %ton = icmp ne i32 %tv, -1
  %toff = and i1 %tne, %ton
  %tacc.n = or i1 %tacc, %toff
  %t.n = add i64 %t, 1
  br label %cend
tend:
  %cred = call i1 @llvm.vector.reduce.or.v8i1(<8 x i1> %cacc)
  %apart = or i1 %cred, %tacc
  %a064 = zext i32 %a0 to i64
  %alast = add i64 %a064, %span4
  %wraps = icmp uge i64 %alast, 4294967295
  %g0 = lshr i64 %a064, %shift
  %glast = lshr i64 %alast, %shift
  %gapart = icmp ne i64 %g0, %glast
  %no0 = or i1 %apart, %wraps
  %no = or i1 %no0, %gapart
  br i1 %no, label %vhead, label %fast
fast:  ; four lanes' rows at a time: <ww, we, rw, re> x 4
  %fep64p = getelementptr i64, ptr %epoch, i64 %g0
  %fep64 = load i64, ptr %fep64p
  %fep = trunc i64 %fep64 to i32
  %foff = and i64 %a064, %mask
  %fdw = lshr i64 %foff, 2
  %fgb = mul i64 %g0, %nd
  %ff = add i64 %fgb, %fdw
  %ff4 = shl i64 %ff, 2
  %fbase = getelementptr i32, ptr %tab, i64 %ff4
  %fw0 = insertelement <4 x i32> poison, i32 %w32, i64 0
  %fwv = shufflevector <4 x i32> %fw0, <4 x i32> poison, <4 x i32> zeroinitializer
  %fe0 = insertelement <4 x i32> poison, i32 %fep, i64 0
  %fev = shufflevector <4 x i32> %fe0, <4 x i32> poison, <4 x i32> zeroinitializer
  br label %fhead
fhead:
  %q = phi i64 [0, %fast], [%q.n, %fnext]
  %qmore = icmp ult i64 %q, %L
  br i1 %qmore, label %fbody, label %lend
fbody:  ; (four lanes all off: nothing to check or enter)
  %qlp = getelementptr i32, ptr %rowp, i64 %q
  %qa = load <4 x i32>, ptr %qlp, align 4
  %qon = icmp ne <4 x i32> %qa, splat (i32 -1)
  %qonm = bitcast <4 x i1> %qon to i4
  %qany = icmp ne i4 %qonm, 0
  br i1 %qany, label %frows, label %fnext
frows:
  %q4 = shl i64 %q, 2
  %qp = getelementptr i32, ptr %fbase, i64 %q4
  %e = load <16 x i32>, ptr %qp, align 4
  %ww = shufflevector <16 x i32> %e, <16 x i32> poison, <4 x i32> <i32 0, i32 4, i32 8, i32 12>
  %we = shufflevector <16 x i32> %e, <16 x i32> poison, <4 x i32> <i32 1, i32 5, i32 9, i32 13>
  %rw = shufflevector <16 x i32> %e, <16 x i32> poison, <4 x i32> <i32 2, i32 6, i32 10, i32 14>
  %re = shufflevector <16 x i32> %e, <16 x i32> poison, <4 x i32> <i32 3, i32 7, i32 11, i32 15>
  %wcur = icmp eq <4 x i32> %we, %fev
  %wother = icmp ne <4 x i32> %ww, %fwv
  %wsome = icmp sge <4 x i32> %ww, zeroinitializer
  %wx = and <4 x i1> %wcur, %wother
  %bywriter = and <4 x i1> %wx, %wsome
  %rcur = icmp eq <4 x i32> %re, %fev
  %rother = icmp ne <4 x i32> %rw, %fwv
  %rsome = icmp ne <4 x i32> %rw, splat (i32 -1)
  %rx = and <4 x i1> %rcur, %rother
  %byreader = and <4 x i1> %rx, %rsome
  %wbad = or <4 x i1> %bywriter, %byreader
  %bad0 = select i1 %isw, <4 x i1> %wbad, <4 x i1> %bywriter
  %bad1 = and <4 x i1> %bad0, %qon
  %bad = select i1 %check, <4 x i1> %bad1, <4 x i1> zeroinitializer
  %badm = bitcast <4 x i1> %bad to i4
  %anybad = icmp ne i4 %badm, 0
  br i1 %anybad, label %frace, label %fenter
fenter:
  %many = select <4 x i1> %byreader, <4 x i32> splat (i32 -2), <4 x i32> %fwv
  %ww.n = select i1 %isw, <4 x i32> %fwv, <4 x i32> %ww
  %we.n = select i1 %isw, <4 x i32> %fev, <4 x i32> %we
  %rw.n = select i1 %isw, <4 x i32> %rw, <4 x i32> %many
  %re.n = select i1 %isw, <4 x i32> %re, <4 x i32> %fev
  %wpair = shufflevector <4 x i32> %ww.n, <4 x i32> %we.n, <8 x i32> <i32 0, i32 4, i32 1, i32 5, i32 2, i32 6, i32 3, i32 7>
  %rpair = shufflevector <4 x i32> %rw.n, <4 x i32> %re.n, <8 x i32> <i32 0, i32 4, i32 1, i32 5, i32 2, i32 6, i32 3, i32 7>
  %e.on = shufflevector <8 x i32> %wpair, <8 x i32> %rpair, <16 x i32> <i32 0, i32 1, i32 8, i32 9, i32 2, i32 3, i32 10, i32 11, i32 4, i32 5, i32 12, i32 13, i32 6, i32 7, i32 14, i32 15>
  %qon16 = shufflevector <4 x i1> %qon, <4 x i1> poison, <16 x i32> <i32 0, i32 0, i32 0, i32 0, i32 1, i32 1, i32 1, i32 1, i32 2, i32 2, i32 2, i32 2, i32 3, i32 3, i32 3, i32 3>
  %e.n = select <16 x i1> %qon16, <16 x i32> %e.on, <16 x i32> %e
  store <16 x i32> %e.n, ptr %qp, align 4
  br label %fnext
fnext:
  %q.n = add i64 %q, 4
  br label %fhead
frace:
  %badm8 = zext i4 %badm to i8
  %first = call i8 @llvm.cttz.i8(i8 %badm8, i1 true)
  %first64 = zext i8 %first to i64
  %fl = add i64 %q, %first64
  br label %race
vhead:  ; a wave none of whose lanes accessed (its row all ones) is skipped: AND over the row, 8 lanes at a time
  %vl = phi i64 [0, %wbody], [%vl.n, %vbody], [0, %tend]
  %vacc = phi <8 x i32> [splat (i32 -1), %wbody], [%vacc.n, %vbody], [splat (i32 -1), %tend]
  %vl.n = add i64 %vl, 8
  %vmore = icmp ule i64 %vl.n, %L
  br i1 %vmore, label %vbody, label %shead
vbody:
  %vp = getelementptr i32, ptr %rowp, i64 %vl
  %vv = load <8 x i32>, ptr %vp, align 4
  %vacc.n = and <8 x i32> %vacc, %vv
  br label %vhead
shead:
  %sl = phi i64 [%vl, %vhead], [%sl.n, %sbody]
  %sacc = phi i32 [-1, %vhead], [%sacc.n, %sbody]
  %smore = icmp ult i64 %sl, %L
  br i1 %smore, label %sbody, label %send
sbody:
  %sp = getelementptr i32, ptr %rowp, i64 %sl
  %sv = load i32, ptr %sp
  %sacc.n = and i32 %sacc, %sv
  %sl.n = add i64 %sl, 1
  br label %shead
send:
  %vred = call i32 @llvm.vector.reduce.and.v8i32(<8 x i32> %vacc)
  %all = and i32 %vred, %sacc
  %idle = icmp eq i32 %all, -1
  br i1 %idle, label %lend, label %lhead
lhead:
  %l = phi i64 [0, %send], [%l.n, %lnext]
  %lmore = icmp ult i64 %l, %L
  br i1 %lmore, label %lbody, label %lend
lbody:
  %ap = getelementptr i32, ptr %rowp, i64 %l
  %a32 = load i32, ptr %ap
  %on = icmp ne i32 %a32, -1
  br i1 %on, label %lane, label %lnext
lane:
  %a = zext i32 %a32 to i64
  %g = lshr i64 %a, %shift
  %off = and i64 %a, %mask
  %dw = lshr i64 %off, 2
  %d = add i64 %dw, %k
  %gb = mul i64 %g, %nd
  %f = add i64 %gb, %d
  %epp = getelementptr i64, ptr %epoch, i64 %g
  %ep64 = load i64, ptr %epp
  %ep = trunc i64 %ep64 to i32
  %f4 = shl i64 %f, 2
  %wq = getelementptr i32, ptr %tab, i64 %f4
  %le = load <4 x i32>, ptr %wq, align 4
  %lww = extractelement <4 x i32> %le, i64 0
  %lwe = extractelement <4 x i32> %le, i64 1
  %lrw = extractelement <4 x i32> %le, i64 2
  %lre = extractelement <4 x i32> %le, i64 3
  ; another wave wrote it in this epoch (lw's wave is -1 where none did)
  %lwcur = icmp eq i32 %lwe, %ep
  %lwother = icmp ne i32 %lww, %w32
  %lwsome = icmp sge i32 %lww, 0
  %lwx = and i1 %lwcur, %lwother
  %lbywriter = and i1 %lwx, %lwsome
  ; another wave (or several: -2) read it in this epoch
  %lrcur = icmp eq i32 %lre, %ep
  %lrother = icmp ne i32 %lrw, %w32
  %lrsome = icmp ne i32 %lrw, -1
  %lrx = and i1 %lrcur, %lrother
  %lbyreader = and i1 %lrx, %lrsome
  %lwbad = or i1 %lbywriter, %lbyreader
  %lbad0 = select i1 %isw, i1 %lwbad, i1 %lbywriter
  %lbad = and i1 %lbad0, %check
  br i1 %lbad, label %race, label %enter
enter:
  %lmany = select i1 %lbyreader, i32 -2, i32 %w32
  %who = select i1 %isw, i32 %w32, i32 %lmany
  %pair0 = insertelement <2 x i32> poison, i32 %who, i64 0
  %pair = insertelement <2 x i32> %pair0, i32 %ep, i64 1
  %hq = getelementptr <2 x i32>, ptr %wq, i64 %half
  store <2 x i32> %pair, ptr %hq, align 4
  br label %lnext
lnext:
  %l.n = add i64 %l, 1
  br label %lhead
lend:
  %j.n = add i64 %j, 1
  br label %whead
wend:
  %k.n = add i64 %k, 1
  br label %khead
race:
  %rl = phi i64 [%l, %lane], [%fl, %frace]
  %pos0 = mul i64 %j, %L
  %pos = add i64 %pos0, %rl
  %pk0 = mul i64 %pos, 64
  %pk = add i64 %pk0, %k
  ret i64 %pk
ok:
  ret i64 -1
}

declare i1 @llvm.vector.reduce.or.v8i1(<8 x i1>)
declare i32 @llvm.vector.reduce.and.v8i32(<8 x i32>)
declare i8 @llvm.cttz.i8(i8, i1)
