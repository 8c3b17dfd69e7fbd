import subprocess, time, sys, os, signal
M="/work/main/target/release/memrel"
def run(label, args_fn, dur=150, marks=False):
    t=subprocess.Popen(["sleep","100000"])
    d=f"/tmp/exp-{label}"
    subprocess.run(["rm","-rf",d])
    p=subprocess.Popen([M]+args_fn(t.pid,d), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out=[]; start=time.time(); nm=0
    while time.time()-start<dur:
        el=time.time()-start
        if marks and el>=nm and os.path.exists(d+"/live"):
            for ph in ["sleep","asleep","wake","settle"]:
                subprocess.run([M,"mark",d,ph],stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL)
            nm+=10
        try:
            rss=[int(l.split()[1]) for l in open(f"/proc/{p.pid}/status") if l.startswith("VmRSS")][0]
        except Exception: rss=-1
        out.append((round(el),rss))
        time.sleep(5)
    p.send_signal(signal.SIGTERM); p.wait(); t.kill()
    print(label, [(a,round(b/1024,2)) for a,b in out if a%30<5])
import threading
which=sys.argv[1]
if which=="attach":
    run("attach", lambda pid,d: ["attach",str(pid),"--no-tree","--interval-ms","1","--dir",d], marks=True)
elif which=="watchnomarks":
    run("watchnm", lambda pid,d: ["watch","--pid",str(pid),"--no-tree","--interval-ms","1","--metrics","127.0.0.1:0","--dir",d], marks=False)
elif which=="attachnomarks":
    run("attachnm", lambda pid,d: ["attach",str(pid),"--no-tree","--interval-ms","1","--dir",d], marks=False)
