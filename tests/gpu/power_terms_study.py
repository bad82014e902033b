#!/usr/bin/env python3
"""Which variable a GPU's power follows, from the readings `twin calibrate --sustained-clock` logged on one H200 on
2026-11-29 19:39 UTC (docs/accuracy/2026-11-29-power-loads-1xH200.tar.gz, calibrate-x1.log; copied below): the
dynamic power as energy per FLOP, as power per share of busy time in tensor-core kernels (active SM-time, at the
clock), or both, each with its clock exponent, fitted on the pure loads (BF16 GEMMs back to back and beside idle SMs,
FP8 GEMMs back to back: two FLOP rates per SM-cycle) and predicting the rest (the curves' GEMM-and-adds points, the
grouped expert GEMM, attention). Offline: no model in the code reads it (docs/ACCURACY.md, "The power model on
class-pure loads"). Usage: python3 tests/gpu/power_terms_study.py"""
import math
S=123.1; FMAX=1968.5; C=(540.0-S)/4199  # W per GB/s at max
L = {  # name: f, P, TFLOP/s busy, TFLOP/s kernel, GB/s
 "bf16 full": (1478,679.9,657.8,674,0), "bf16 idle .75": (1701,678.4,551.9,776,0), "bf16 idle .5": (1968,524.3,391.6,801,0),
 "fp8 full": (1432,696.7,1261.8,1325,0),
 "fp8 .813": (1507,684.2,1042.9,1374,764), "fp8 .623": (1612,681.9,853.8,1459,1564), "fp8 .392": (1847,694.5,584.6,1549,2569),
 "bf16 .809": (1552,694.1,550.3,704,807), "bf16 .621": (1625,662.3,439.6,726,1612), "bf16 .406": (1804,700.8,314.6,794,2542),
 "grouped": (1964,670.6,323.7,422,0), "attention": (1761,686.0,374.1,388,0)}
FIT=["bf16 full","bf16 idle .75","bf16 idle .5","fp8 full"]
def terms(n):
    f,P,F,Fk,B=L[n]; u=F/Fk; return f,P,u,F,B
def fit(x, names, use_A=True, use_e=True):
    # LS for A (per unit share at f/fmax scaling) and e (pJ/FLOP)
    rows=[]
    for n in names:
        f,P,u,F,B=terms(n); s=(f/FMAX)**x
        y=P-S-s*C*B
        rows.append((s*u*(f/FMAX) if use_A else 0, s*F if use_e else 0, y))
    # 2x2 normal eqs
    a11=sum(r[0]*r[0] for r in rows); a12=sum(r[0]*r[1] for r in rows); a22=sum(r[1]*r[1] for r in rows)
    b1=sum(r[0]*r[2] for r in rows); b2=sum(r[1]*r[2] for r in rows)
    if use_A and use_e:
        det=a11*a22-a12*a12; A=(b1*a22-b2*a12)/det; e=(a11*b2-a12*b1)/det
    elif use_A: A=b1/a11; e=0
    else: A=0; e=b2/a22
    err=sum((r[0]*A+r[1]*e-r[2])**2 for r in rows)
    return A,e,err
def pred(n,x,A,e):
    f,P,u,F,B=terms(n); s=(f/FMAX)**x
    return S+s*(A*u*(f/FMAX)+e*F+C*B)
for label,useA,usee in (("per FLOP",False,True),("per active time",True,False),("both",True,True)):
    best=min((fit(x/100,FIT,useA,usee)[2],x/100) for x in range(0,400))
    x=best[1]; A,e,_=fit(x,FIT,useA,usee)
    print(f"{label}: exponent {x:.2f}, A {A:.0f} W, e {e:.3f} pJ/FLOP")
    for n in L:
        print(f"   {n:14s} meas {L[n][1]:.0f} pred {pred(n,x,A,e):.0f} ({100*(pred(n,x,A,e)/L[n][1]-1):+.1f}%)" + (" [fit]" if n in FIT else ""))
