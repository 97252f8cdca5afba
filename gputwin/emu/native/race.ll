; The LDS race checker's per-access work (gputwin/emu/checks.py, Checks._lds and _flush) on the addresses a native
; block logged, as host code over the same table: per LDS dword f (workgroup slot * nd + dword), row tab[4f..4f+3]
; (int32) holds the last writer (wave, epoch) and the last reader (wave, or -2 for many readers; epoch), the epoch
; being its workgroup's barrier count (from 1: a zero row, or one of an earlier epoch, is no access). Loaded once per
; process (native/tier.py `support`).
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

define i64 @lds_access(ptr %log, i64 %stride, i64 %site, ptr %waves, i64 %nw, i64 %L, i64 %dwords, i64 %write,
                       ptr %tab, ptr %epoch, i64 %nd, i64 %shift, i64 %mask) {
entry:
  %isw = icmp eq i64 %write, 1
  %check = icmp ne i64 %write, 2
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
  %row0 = mul i64 %w, %stride
  %row1 = add i64 %row0, %site
  %row = mul i64 %row1, %L
  br label %ahead
ahead:  ; a wave none of whose lanes accessed (its row all ones) is skipped: one vectorised AND over the row
  %al = phi i64 [0, %wbody], [%al.n, %abody]
  %acc = phi i32 [-1, %wbody], [%acc.n, %abody]
  %amore = icmp ult i64 %al, %L
  br i1 %amore, label %abody, label %aend
abody:
  %aat = add i64 %row, %al
  %aap = getelementptr i32, ptr %log, i64 %aat
  %av = load i32, ptr %aap
  %acc.n = and i32 %acc, %av
  %al.n = add i64 %al, 1
  br label %ahead
aend:
  %idle = icmp eq i32 %acc, -1
  br i1 %idle, label %lend, label %lhead
lhead:
  %l = phi i64 [0, %aend], [%l.n, %lnext]
  %lmore = icmp ult i64 %l, %L
  br i1 %lmore, label %lbody, label %lend
lbody:
  %at = add i64 %row, %l
  %ap = getelementptr i32, ptr %log, i64 %at
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
  %ep = load i64, ptr %epp
  %f4 = shl i64 %f, 2
  %wq = getelementptr i32, ptr %tab, i64 %f4
  %weq = getelementptr i32, ptr %wq, i64 1
  %rq = getelementptr i32, ptr %wq, i64 2
  %req = getelementptr i32, ptr %wq, i64 3
  %ww32 = load i32, ptr %wq
  %we32 = load i32, ptr %weq
  %rw32 = load i32, ptr %rq
  %re32 = load i32, ptr %req
  %ww = sext i32 %ww32 to i64
  %we = sext i32 %we32 to i64
  %rw = sext i32 %rw32 to i64
  %re = sext i32 %re32 to i64
  ; another wave wrote it in this epoch (lw's wave is -1 where none did)
  %wcur = icmp eq i64 %we, %ep
  %wother = icmp ne i64 %ww, %w
  %wsome = icmp sge i64 %ww, 0
  %wx = and i1 %wcur, %wother
  %bywriter = and i1 %wx, %wsome
  ; another wave (or several: -2) read it in this epoch
  %rcur = icmp eq i64 %re, %ep
  %rother = icmp ne i64 %rw, %w
  %rsome = icmp ne i64 %rw, -1
  %rx = and i1 %rcur, %rother
  %byreader = and i1 %rx, %rsome
  %wbad = or i1 %bywriter, %byreader
  %bad0 = select i1 %isw, i1 %wbad, i1 %bywriter
  %bad = and i1 %bad0, %check
  br i1 %bad, label %race, label %enter
enter:
  br i1 %isw, label %store, label %load
store:
  %w32 = trunc i64 %w to i32
  %ep32 = trunc i64 %ep to i32
  store i32 %w32, ptr %wq
  store i32 %ep32, ptr %weq
  br label %lnext
load:
  %many = select i1 %byreader, i64 -2, i64 %w
  %many32 = trunc i64 %many to i32
  %epr32 = trunc i64 %ep to i32
  store i32 %many32, ptr %rq
  store i32 %epr32, ptr %req
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
  %pos0 = mul i64 %j, %L
  %pos = add i64 %pos0, %l
  %pk0 = mul i64 %pos, 64
  %pk = add i64 %pk0, %k
  ret i64 %pk
ok:
  ret i64 -1
}
