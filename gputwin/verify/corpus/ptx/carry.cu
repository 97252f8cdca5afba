// 128-bit adds through PTX carry chains (add.cc/addc/sub.cc/subc/mad.lo.cc/madc).
__global__ void carry(const unsigned* a, unsigned* o) {
  unsigned r0, r1, r2, r3; int i = threadIdx.x * 4;
  asm("add.cc.u32 %0, %4, %8;\n\taddc.cc.u32 %1, %5, %9;\n\taddc.cc.u32 %2, %6, %10;\n\taddc.u32 %3, %7, %11;"
      : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
      : "r"(a[i]), "r"(a[i+1]), "r"(a[i+2]), "r"(a[i+3]), "r"(a[i+4]), "r"(a[i+5]), "r"(a[i+6]), "r"(a[i+7]));
  asm("sub.cc.u32 %0, %0, %2;\n\tsubc.u32 %1, %1, %3;" : "+r"(r0), "+r"(r1) : "r"(a[i+2]), "r"(a[i+3]));
  asm("mad.lo.cc.u32 %0, %0, %2, %3;\n\tmadc.hi.u32 %1, %1, %2, %3;" : "+r"(r2), "+r"(r3) : "r"(a[i]), "r"(a[i+1]));
  o[i] = r0; o[i+1] = r1; o[i+2] = r2; o[i+3] = r3;
}
