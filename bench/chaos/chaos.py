#!/usr/bin/env python3
"""Chaos campaign for bamboo-train: randomized real-signal fault schedules.

Each run is drawn from one seed (its config, its faults, which workers they hit),
started as a child, driven by what it logs, and then held to the contract: exit 0,
`bamboo-ledger verify` passes, losses and final state digests equal a fault-free run's
bit for bit. Standard library only; see README.md next to this file.
"""
import argparse, collections, csv, datetime, os, queue, random, re, shutil, signal
import subprocess, sys, tempfile, threading, time

MODEL = ['--stages', '4', '--layers', '4', '--d-model', '32', '--heads', '2', '--seq-len', '16',
         '--micro-batch', '2', '--global-batch', '8', '--threads', '1']
STAGES = 4
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TRACES = os.path.join(REPO, 'examples', 'sim', 'traces')
PHASES = ('checkpoint', 'replan', 'rollback', 'join')

# Everything this script started, so that any exit path can kill it.
CHILDREN, TRACKED = set(), set()

# --- log parsing ------------------------------------------------------------------
R_TS = re.compile(r'^\[(\d\d):(\d\d):(\d\d)\.(\d{3})\]')
R_STEP = re.compile(r'^step (\d+) \(\d+/\d+\)')
R_WJOIN = re.compile(r'bamboo-worker: joined (?:again )?as node (\d+) \(pid (\d+)\)')
R_DEATH = re.compile(r'\bnode (\d+)(?: lost\b| left\b|: leaving)')
R_MGR = re.compile(r'bamboo-manager \(pid (\d+)\) listens')
R_ROLE = re.compile(r'node (\d+): stage (\d+), replica of stage (\d+), generation (\d+)')
R_CKPT = re.compile(r'\[bamboo\.checkpoint\] \[\w+\] checkpoint of step (\d+) (?:not )?written')
R_REPLAN = re.compile(r'a new plan before step (\d+)')
R_ROLLBACK = re.compile(r'rolling back to the checkpoint of step (\d+)')
R_RESTART = re.compile(r'bamboo-train: bamboo-manager lost .* restart')
R_JOINSTART = re.compile(r'bamboo-train: (?:(\d+) new worker\(s\) start|a replacement worker starts'
                         r'|trace t=\S+ s: \S+ added, a new worker)')
R_JOINED = re.compile(r'node \d+ joined: standby')
R_TRACEKILL = re.compile(r'trace t=\S+ s: \S+ removed, (kill -9|SIGTERM) of its worker \(node (\d+), pid (\d+)\)')
R_INJECT = re.compile(r'\[bamboo\.manager\] \[warning\] node (\d+) lost in step \d+ \(preempted\)')


def log_time(text, recv):
    """spdlog's wall-clock stamp as epoch seconds (same clock as time.time())."""
    m = R_TS.match(text)
    if not m:
        return None
    d = datetime.datetime.fromtimestamp(recv)
    t = d.replace(hour=int(m[1]), minute=int(m[2]), second=int(m[3]),
                  microsecond=int(m[4]) * 1000).timestamp()
    return t + 86400 if t - recv < -43200 else t - 86400 if t - recv > 43200 else t


def hms(t):
    return datetime.datetime.fromtimestamp(t).strftime('%H:%M:%S.%f')[:-3]


class Watch:
    """Reads a run's output as it comes and keeps what the faults need: who is alive
    (per pid, intervals), which phases are open (intervals), the stage plan."""

    def __init__(self, cfg):
        self.every, self.embedded = cfg.get('every'), cfg['mode'] == 'embedded'
        self.step, self.started, self.done = -1, None, None
        self.mgr, self.node_pid, self.life = None, {}, collections.defaultdict(list)
        self.roles = {}                     # generation -> {stage: node}
        self.phases = []                    # [name, open_t, close_t, key]
        self.joining, self.injected, self.count = 0, [], collections.Counter()

    def _open(self, name, t, key=None):
        self.phases.append([name, t, None, key])

    def _close(self, t, pred):
        for p in self.phases:
            if p[2] is None and pred(p):
                p[2] = t

    def _die(self, pid, t):
        if pid in self.life and self.life[pid][-1][1] is None:
            self.life[pid][-1][1] = t

    def feed(self, recv, text):
        """Returns the triggers this line fires: ('step', K) or a phase name."""
        lt = log_time(text, recv)
        t = lt if lt is not None else recv
        out = []
        if self.started is None:
            self.started = recv
        m = R_STEP.match(text)
        if m:
            k = int(m[1])
            self.step = k
            # replan/rollback are open until the step they resume from commits
            self._close(recv, lambda p: p[0] in ('replan', 'rollback') and (p[3] is None or k >= p[3]))
            if self.every and (k + 1) % self.every == 0:
                self._open('checkpoint', recv, k + 1)   # snapshot at this boundary
                out.append('checkpoint')
            out.append(('step', k + 1))
        if (m := R_CKPT.search(text)) and '/replan' not in text:
            self._close(t, lambda p, k=int(m[1]): p[0] == 'checkpoint' and p[3] == k)
        if m := R_REPLAN.search(text):
            self._open('replan', t, int(m[1])); out.append('replan'); self.count['replans'] += 1
        if m := R_ROLLBACK.search(text):
            self._open('rollback', t, int(m[1])); out.append('rollback'); self.count['rollbacks'] += 1
        if R_RESTART.search(text):
            self._open('rollback', t); out.append('rollback'); self.count['restarts'] += 1
            for pid in list(self.life):
                self._die(pid, t)
            self._die(self.mgr, t)
            self.node_pid, self.joining = {}, 0
            self._close(t, lambda p: p[0] == 'join')
        if m := R_JOINSTART.search(text):
            if self.joining == 0:
                self._open('join', recv); out.append('join')
            self.joining += int(m[1] or 1)
        if R_JOINED.search(text) and self.joining > 0:
            self.joining -= 1
            if self.joining == 0:
                self._close(t, lambda p: p[0] == 'join')
        if m := R_WJOIN.search(text):
            node, pid = int(m[1]), int(m[2])
            self.node_pid[node] = pid
            self.life[pid].append([recv, None])
            TRACKED.add(pid)
        elif m := R_DEATH.search(text):
            self._die(self.node_pid.get(int(m[1])), t)
        if m := R_MGR.search(text):
            self.mgr = int(m[1])
            self.life[self.mgr].append([recv, None])
            TRACKED.add(self.mgr)
        if m := R_ROLE.search(text):
            self.roles.setdefault(int(m[4]), {})[int(m[2])] = int(m[1])
        if m := R_TRACEKILL.search(text):
            pid = int(m[3])
            # the launcher prints this after signalling: judge liveness a little earlier
            self.injected.append({'kind': 'trace-' + ('kill' if m[1] == 'kill -9' else 'notice'),
                                  'sent': recv, 'targets': [pid], 'slack': 0.1})
        if (m := R_INJECT.search(text)) and self.embedded:
            self.injected.append({'kind': 'inject-kill', 'sent': t, 'targets': []})
        if 'run complete:' in text:
            self.done = self.done or t
            self._die(self.mgr, t)
        return out

    def alive(self, pid, t):
        if pid == 'process':
            return self.done is None or t < self.done
        return any(a <= t and (b is None or t < b) for a, b in self.life.get(pid, ()))

    def open_at(self, t):
        return sorted({p[0] for p in self.phases if p[1] <= t and (p[2] is None or t < p[2])})

    def live_workers(self):
        now = time.time()
        return [p for n, p in self.node_pid.items() if p != self.mgr and self.alive(p, now)]

    def adjacent(self, r):
        """Two live nodes holding neighbouring stages in the newest plan (an uncovered loss)."""
        if not self.roles:
            return []
        plan = self.roles[max(self.roles)]
        pairs = [(plan[s], plan[(s + 1) % len(plan)]) for s in plan if (s + 1) % len(plan) in plan]
        live = set(self.live_workers())
        pairs = [(self.node_pid.get(a), self.node_pid.get(b)) for a, b in pairs if a != b]
        pairs = [p for p in pairs if p[0] in live and p[1] in live]
        return list(r.choice(pairs)) if pairs else []


# --- run plans ------------------------------------------------------------------------
def trace_window(r, short):
    """A window of an AWS trace, rebased to 0, in which the worker slots keep >= 3
    workers and at least one slot's worker is removed."""
    name = r.choice(['aws-p3-trace.csv', 'aws-g4dn-trace.csv'])
    ev = []
    for line in open(os.path.join(TRACES, name)):
        f = line.strip().split(',')
        if len(f) == 3 and f[0].isdigit():
            ev.append((int(f[0]), f[1], f[2]))
    slots = r.choice([5, 6])
    width = (40 if short else r.choice([60, 90])) * 60000
    for _ in range(500):
        t0 = r.randrange(0, ev[-1][0] - width)
        start = []
        for t, a, n in ev:
            if t > t0:
                break
            if a == 'add':
                start.append(n)
            elif n in start:
                start.remove(n)
        win = [(t - t0, a, n) for t, a, n in ev if t0 < t <= t0 + width]
        held, low, kills = set(start[:slots]), len(start[:slots]), 0
        for t, a, n in win:
            if a == 'add' and len(held) < slots:
                held.add(n)
            elif a == 'remove' and n in held:
                held.discard(n); low = min(low, len(held))
                kills += t < 0.7 * width      # early enough to land while training
        if len(start[:slots]) >= STAGES and low >= 3 and kills >= 1:
            lines = [f'0,add,{n}' for n in start] + [f'{t},{a},{n}' for t, a, n in win]
            return {'trace': name, 't0_min': t0 / 60000, 'width_min': width / 60000,
                    'slots': slots, 'lines': lines}
    raise SystemExit('chaos: no usable trace window found')


def plan_run(seed, mode, short):
    r = random.Random(seed)
    c = {'seed': seed, 'mode': mode, 'model_seed': r.randrange(1, 100000), 'short': short,
         'redundancy': r.choice(['lazy', 'eager']), 'opts': [], 'faults': []}
    dur = lambda: round(r.uniform(0.5, 2.0 if short else 5.0), 2)
    c['every'] = r.choice([5, 7, 10]) if mode != 'trace' else r.choice([10, 20])
    c['opts'] += ['--checkpoint-dir', 'ckpt', '--checkpoint-every', str(c['every'])]
    if mode == 'embedded':
        c['steps'] = 150 if short else r.randint(150, 400)
        inj = r.choice(['none', 'pair', 'single'])
        k = r.randint(20, c['steps'] - 30)
        if inj == 'pair':     # two neighbours in one step: shadows cannot cover, roll back
            s = r.randrange(STAGES)
            for n in (s, (s + 1) % STAGES):
                c['opts'] += ['--preempt', f'node={n}@step={k}.op={r.randrange(8)}']
        elif inj == 'single':  # a failover, then a re-partition at the next boundary
            c['opts'] += ['--preempt', f'node={r.randrange(STAGES)}@step={k}.op={r.randrange(8)}',
                          '--min-stages', '2']
        phases = ['checkpoint'] + {'pair': ['rollback'], 'single': ['replan']}.get(inj, [])
        for _ in range(r.randint(1, 2 if short else 5)):
            f = {'kind': 'stop-process', 'dur': dur()}
            if r.random() < 0.5:
                f['phase'] = r.choice(phases)
            else:
                f['step'] = r.randint(5, c['steps'] - 5)
            c['faults'].append(f)
    elif mode == 'processes':
        c['steps'] = r.randint(60, 80) if short else r.randint(80, 160)
        workers, joins = STAGES + r.randint(0, 2), 0
        kinds = ['kill-burst'] * 3 + ['stop-worker'] * 2 + ['stop-manager'] * 2 + [
            'term-worker'] + ['kill@checkpoint', 'kill@replan', 'kill@rollback', 'kill@join'] * 2
        chosen = [r.choice(kinds) for _ in range(3 if short else r.randint(3, 7))]
        if 'kill@replan' in chosen:      # needs a node holding two stages and a standby
            workers = max(workers, STAGES + 1)
            chosen.append('kill-1')
        if 'kill@rollback' in chosen:
            chosen.append('kill-pair')
        if 'kill@join' in chosen or r.random() < 0.5:
            joins = r.randint(1, 3)
            c['opts'] += ['--join', f'step={r.randint(5, c["steps"] // 2)},count={joins}']
        if r.random() < 0.4:
            c['opts'] += ['--min-stages', '2']
        if not short and r.random() < 0.7:  # killed workers come back: more faults land
            c['opts'] += ['--replace-after-s', r.choice(['0.5', '1', '2'])]
        c['opts'] += ['--processes', '--workers', str(workers), '--restarts', '2']
        if 'stop-manager' in chosen and r.random() < 0.5:
            c['opts'] += ['--manager-timeout-s', '2']   # a long stall then costs a restart
        for kind in chosen:
            f = {'kind': kind}
            if kind.startswith('kill@'):
                f['kind'], f['phase'] = 'kill', kind[5:]
            else:
                f['step'] = r.randint(5, c['steps'] - 8)
            if kind == 'kill-burst':
                f['n'] = r.randint(1, 3)
            if kind in ('kill-1', 'kill-pair'):
                f['kind'], f['n'], f['adjacent'] = 'kill-burst', 1 + (kind == 'kill-pair'), kind == 'kill-pair'
            if kind.startswith('stop'):
                f['dur'] = dur()
            c['faults'].append(f)
    else:
        w = trace_window(r, short)
        c['window'] = w
        speed = r.choice([240, 300]) if short else r.choice([180, 240, 300])
        # trace time starts with training: enough steps (~35 ms each) to outlast the window
        c['steps'] = min(900, max(150, int(w['width_min'] * 60 / speed / 0.035)))
        c['opts'] += ['--processes', '--spot-trace', 'trace.csv', '--trace-speedup', str(speed),
                      '--max-workers', str(w['slots']), '--notice-s', r.choice(['0', '0', '1']),
                      '--replacement-wait-s', '10']  # trace adds may still be loading
        if r.random() < 0.5:
            c['opts'] += ['--min-stages', '2']
    stalls = sum(f.get('dur', 0) for f in c['faults'])
    base = {'embedded': 30, 'processes': 60, 'trace': 75}[mode]
    c['timeout'] = round(base + stalls + c['steps'] * (0.03 if mode == 'embedded' else 0.2))
    return c


def command(c, bindir):
    return ([os.path.join(bindir, 'bamboo-train')] + MODEL +
            ['--seed', str(c['model_seed']), '--steps', str(c['steps']), '--redundancy',
             c['redundancy'], '--metrics', 'metrics.csv', '--ledger', 'ledger.txt',
             '--state-digests', 'digests.csv'] + c['opts'])


# --- driving one run ----------------------------------------------------------------------
def signal_pid(pid, sig):
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def drive(c, bindir, work, log):
    """Starts the run, fires its faults as their triggers show up, waits for the end."""
    r = random.Random(c['seed'] ^ 0x5eed)
    if 'window' in c:
        with open(os.path.join(work, 'trace.csv'), 'w') as f:
            f.write('\n'.join(c['window']['lines']) + '\n')
    # token directories go under the scratch dir, so a killed launcher leaves none behind
    xdg = os.path.join(os.path.dirname(work), 'xdg')
    os.makedirs(xdg, mode=0o700, exist_ok=True)
    proc = subprocess.Popen(['nice', '-n', '5'] + command(c, bindir), cwd=work,
                            env=dict(os.environ, XDG_RUNTIME_DIR=xdg),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True, text=True,
                            errors='replace', bufsize=1)
    CHILDREN.add(proc)
    lines = queue.Queue()
    threading.Thread(target=lambda: ([lines.put((time.time(), l)) for l in proc.stdout],
                                     lines.put(None)), daemon=True).start()
    w, pending, doomed = Watch(c), list(c['faults']), set()
    conts, delayed = [], []      # (due, pid) to SIGCONT; (due, fault) to fire
    deadline, timed_out = time.time() + c['timeout'], False

    def fire(f):
        f['fired'] = True
        if f['kind'] == 'stop-process':
            targets = ['process']
        elif f['kind'] == 'stop-manager':
            targets = [w.mgr] if w.mgr and w.alive(w.mgr, time.time()) else []
        else:
            free = [p for p in w.live_workers() if p not in doomed]
            n = f.get('n', 1)
            targets = w.adjacent(r) if f.get('adjacent') else []
            if not targets and len(free) - n >= 2:   # fewer than 2 workers ends the run (exit 3)
                targets = r.sample(free, n)
            if len(free) - len(targets) < 2:
                targets = []
        if not targets:
            f['skipped'] = 'no live target that would leave 2 workers'
            return
        sig = {'stop': signal.SIGSTOP, 'term': signal.SIGTERM}.get(f['kind'][:4], signal.SIGKILL)
        f['targets'], f['sent'] = targets, time.time()
        for p in targets:
            signal_pid(proc.pid if p == 'process' else p, sig)
            if p != 'process' and f['kind'] != 'stop-manager':
                doomed.add(p)
            if sig == signal.SIGSTOP:
                conts.append((f['sent'] + f['dur'], proc.pid if p == 'process' else p))
        log.write(f'{hms(f["sent"])} | chaos: {f["kind"]} of {targets} ({f.get("phase", "step")})\n')

    while True:
        now = time.time()
        for x in [x for x in conts if x[0] <= now]:
            signal_pid(x[1], signal.SIGCONT)
            conts.remove(x)
        for x in [x for x in delayed if x[0] <= now]:
            delayed.remove(x)
            fire(x[1])
        if now > deadline and not timed_out:
            timed_out = True
            log.write(f'chaos: no exit within {c["timeout"]} s: killing the run\n')
            kill_group(proc)
        wait = min([d for d, _ in conts + delayed] + [deadline + (5 if timed_out else 0)]) - now
        try:
            item = lines.get(timeout=max(0.01, wait))
        except queue.Empty:
            if timed_out and time.time() > deadline + 5:
                break
            continue
        if item is None:
            break
        recv, text = item
        log.write(hms(recv) + ' | ' + text)
        stopped = {p for _, p in conts}
        for trig in w.feed(recv, text.rstrip('\n')):
            for f in [f for f in pending if not f.get('fired')]:
                if f['kind'].startswith('stop') and stopped:
                    continue                  # one stall at a time, each its own
                if trig == f.get('phase') or (isinstance(trig, tuple) and trig[1] >= f.get('step', 1e9)):
                    if f.get('phase') == 'join':    # joins take seconds: land inside
                        f['fired'] = True
                        delayed.append((time.time() + r.uniform(0, 1.0), f))
                    else:
                        fire(f)
                        stopped |= {p for _, p in conts}
                    break                     # one fault per trigger
    for _, p in conts:
        signal_pid(p, signal.SIGCONT)
    try:
        rc = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        kill_group(proc); rc = proc.wait()
    kill_group(proc)
    CHILDREN.discard(proc)
    return rc, timed_out, w


def judge_faults(c, w):
    """A fault counts if its targets were alive and its phase open when it landed."""
    for f in c['faults'] + w.injected:
        if 'sent' not in f:
            continue
        t = f['sent']
        f['observed'] = w.open_at(t) or ['steady']
        alive = all(w.alive(p, t - f.get('slack', 0)) for p in f['targets'])
        inphase = f.get('phase') is None or f['phase'] in f['observed']
        f['counted'] = alive and inphase
        if not f['counted']:
            f['why'] = 'target not alive' if not alive else f'{f["phase"]} phase not open'
    return [f for f in c['faults'] + w.injected]


# --- checks --------------------------------------------------------------------------------
def read_losses(path):
    with open(path) as f:
        return [(int(row['step']), row['loss']) for row in csv.DictReader(f)]


def read_digests(path):
    with open(path) as f:
        return [(row['role'], row['name'], row['count'], row['digest']) for row in csv.DictReader(f)]


def compare(c, work, ref, exited):
    bad = []
    try:
        rows = read_losses(os.path.join(work, 'metrics.csv'))
    except (OSError, KeyError, ValueError) as e:
        return [f'metrics unreadable: {e}']
    want = dict(ref['losses'])
    diff = [(k, l, want.get(k)) for k, l in rows if want.get(k) != l]
    if diff:
        k, got, exp = diff[0]
        bad.append(f'{len(diff)} loss(es) differ, first step {k}: {got} vs fault-free {exp}')
    missing = sorted(set(want) - {k for k, _ in rows})
    if missing:
        bad.append(f'{len(missing)} step(s) never committed, first {missing[0]}')
    elif not exited:
        bad.append(f'all {len(want)} steps had committed')
    if not exited:
        return bad        # no final state to compare
    try:
        got = read_digests(os.path.join(work, 'digests.csv'))
    except (OSError, KeyError) as e:
        return bad + [f'digests unreadable: {e}']
    ctr = re.compile(r'^stage\d+#steps$')
    depth = lambda rows: {n for _, n, _, _ in rows if ctr.match(n)}
    skip = depth(got) != depth(ref['digests'])   # another depth at the end: counters differ
    exp = {n: (k, d) for role, n, k, d in ref['digests'] if role == 'owner'}
    owners = {n for role, n, _, _ in got if role == 'owner'}
    wrong = [n for role, n, k, d in got if not (skip and ctr.match(n)) and exp.get(n) != (k, d)]
    lost = [n for n in exp if n not in owners and not (skip and ctr.match(n))]
    if wrong:
        bad.append(f'{len(wrong)} final tensor digest(s) differ, e.g. {wrong[0]}')
    if lost:
        bad.append(f'{len(lost)} tensor(s) missing from the final state, e.g. {lost[0]}')
    return bad


def reference(c, bindir, scratch, cache):
    key = (c['model_seed'], c['steps'])
    if key not in cache:
        d = tempfile.mkdtemp(prefix='ref-', dir=scratch)
        cmd = [os.path.join(bindir, 'bamboo-train')] + MODEL + [
            '--seed', str(c['model_seed']), '--steps', str(c['steps']), '--quiet',
            '--metrics', 'ref.csv', '--state-digests', 'ref-digests.csv']
        p = subprocess.Popen(['nice', '-n', '5'] + cmd, cwd=d, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        CHILDREN.add(p)
        rc = p.wait()
        CHILDREN.discard(p)
        if rc != 0:
            raise RuntimeError(f'the fault-free run failed (exit {rc}): {" ".join(cmd)}')
        cache[key] = {'losses': read_losses(os.path.join(d, 'ref.csv')),
                      'digests': read_digests(os.path.join(d, 'ref-digests.csv'))}
    return cache[key]


# --- cleanup -------------------------------------------------------------------------------
def kill_group(proc):
    for sig in (signal.SIGCONT, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def kill_all():
    for p in list(CHILDREN):
        kill_group(p)
    # the launcher puts each worker in a group of its own: kill those we saw, if still ours
    for pid in TRACKED:
        try:
            with open(f'/proc/{pid}/cmdline', 'rb') as f:
                if b'bamboo-' not in f.read():
                    continue
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def on_signal(sig, _frame):
    raise KeyboardInterrupt(f'signal {sig}')


# --- campaign ------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    on_path = shutil.which('bamboo-train')
    ap.add_argument('--bin', default=os.path.dirname(on_path) if on_path
                    else os.path.join(REPO, 'build', 'examples'),
                    help='directory holding bamboo-train and bamboo-ledger')
    ap.add_argument('--seed', type=int, default=1, help='campaign seed (draws each run seed)')
    ap.add_argument('--runs', type=int, default=10)
    ap.add_argument('--minutes', type=float, help='stop starting runs after this many minutes')
    ap.add_argument('--mode', choices=['mixed', 'embedded', 'processes', 'trace'], default='mixed')
    ap.add_argument('--short', action='store_true', help='4 small runs, one of each kind (ctest)')
    ap.add_argument('--run-seed', type=int, help='run only this run seed (a reproduction)')
    ap.add_argument('--save', help='copy each run\'s files (log, csv, ledger) here')
    ap.add_argument('--verbose', action='store_true', help='print each fault as judged')
    a = ap.parse_args()
    for name in ('bamboo-train', 'bamboo-ledger'):
        if not os.access(os.path.join(a.bin, name), os.X_OK):
            ap.error(f'no {name} in {a.bin} (give --bin)')
    a.bin = os.path.abspath(a.bin)
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)

    draw = random.Random(a.seed)
    cycle = ['embedded', 'processes', 'trace', 'processes']
    if a.run_seed is not None:
        runs = [(a.run_seed, a.mode if a.mode != 'mixed' else
                 random.Random(a.run_seed).choice(['embedded', 'processes', 'processes', 'trace']))]
    else:
        n = 4 if a.short else a.runs
        runs = []
        for i in range(n):
            s = draw.randrange(1, 2 ** 31)
            m = cycle[i % 4] if a.short and a.mode == 'mixed' else a.mode
            runs.append((s, m if m != 'mixed' else random.Random(s).choice(
                ['embedded', 'processes', 'processes', 'trace'])))

    scratch = tempfile.mkdtemp(prefix='bamboo-chaos-')
    t_start, cache, results = time.time(), {}, []
    try:
        for i, (seed, mode) in enumerate(runs):
            if a.minutes and time.time() - t_start > a.minutes * 60:
                break
            c = plan_run(seed, mode, a.short)
            work = os.path.join(scratch, f'run-{seed}')
            os.mkdir(work)
            t0 = time.time()
            with open(os.path.join(work, 'run.log'), 'w') as log:
                log.write('chaos: ' + ' '.join(command(c, a.bin)) + '\n')
                log.write(f'chaos: plan {c["faults"]} window {c.get("window", {}).get("t0_min")}\n')
                rc, timed_out, w = drive(c, a.bin, work, log)
                faults = judge_faults(c, w)
                for f in faults:
                    log.write(f'chaos: judged {f}\n')
            # a checkpoint the manager never reports written or not written: a note, not a failure
            silent = sorted({p[3] for p in w.phases if p[0] == 'checkpoint' and p[2] is None})
            notes = [f'checkpoint(s) of step {silent} never reported (written or not)'] if silent and rc == 0 else []
            bad = [f'no exit within {c["timeout"]} s' if timed_out else f'exit status {rc}'] \
                if timed_out or rc != 0 else []
            v = subprocess.run([os.path.join(a.bin, 'bamboo-ledger'), 'verify', 'ledger.txt'],
                               cwd=work, capture_output=True, text=True)
            if v.returncode != 0:
                tail = (v.stdout + v.stderr).strip().splitlines()[-1:] or ['']
                bad.append(f'bamboo-ledger verify exit {v.returncode}: {tail[0]}')
            try:
                bad += compare(c, work, reference(c, a.bin, scratch, cache), rc == 0 and not timed_out)
            except RuntimeError as e:
                bad.append(str(e))
            repro = (f'python3 {os.path.relpath(__file__, os.getcwd())} --bin {a.bin} '
                     f'--run-seed {seed} --mode {mode}' + (' --short' if a.short else ''))
            res = {'seed': seed, 'mode': mode, 'bad': bad, 'notes': notes, 'faults': faults, 'count': w.count,
                   'secs': time.time() - t0, 'repro': repro}
            results.append(res)
            fired = [f for f in faults if 'sent' in f]
            print(f'[{i + 1}/{len(runs)}] seed {seed} {mode:9} steps {c["steps"]:3}: '
                  f'{len(fired)} fault(s), {sum(f["counted"] for f in fired)} counted, '
                  f'{w.count["rollbacks"]} rollback(s), {w.count["restarts"]} restart(s) '
                  f'-> {"FAIL: " + "; ".join(bad) if bad else "ok"} ({res["secs"]:.0f} s)'
                  + ''.join(f' [note: {n}]' for n in notes),
                  flush=True)
            if a.verbose:
                for f in faults:
                    print(f'    {f["kind"]} {f.get("phase", f.get("step", ""))}: '
                          f'{"counted " + "+".join(f["observed"]) if f.get("counted") else f.get("why") or f.get("skipped") or "not fired"}')
            if a.save:
                dst = os.path.join(a.save, f'run-{seed}' + ('-FAILED' if bad else ''))
                shutil.copytree(work, dst, ignore=shutil.ignore_patterns('ckpt'), dirs_exist_ok=True)
            shutil.rmtree(work, ignore_errors=True)
    except KeyboardInterrupt:
        print('chaos: interrupted', file=sys.stderr)
    finally:
        kill_all()
        shutil.rmtree(scratch, ignore_errors=True)
    return report(results, time.time() - t_start)


def report(results, secs):
    by = collections.Counter(r['mode'] for r in results)
    failed = [r for r in results if r['bad']]
    print(f'\nruns: {len(results)} ({", ".join(f"{n} {m}" for m, n in sorted(by.items()))}) '
          f'in {secs / 60:.1f} min; passed {len(results) - len(failed)}, failed {len(failed)}')
    table, missed, unfired = collections.defaultdict(collections.Counter), collections.Counter(), collections.Counter()
    survived = 0
    for r in results:
        for f in r['faults']:
            k = f['kind'] if f['kind'] != 'kill' else f'kill@{f["phase"]}'
            if 'sent' not in f:
                unfired[k] += 1
            elif not f['counted']:
                missed[f'{k} ({f["why"]})'] += 1
            else:
                table[k]['+'.join(f['observed'])] += 1
                survived += not r['bad']
    print('faults by kind and phase (counted: target alive, phase open when it landed):')
    for k in sorted(table):
        print(f'  {k:16} ' + ', '.join(f'{p} {n}' for p, n in sorted(table[k].items())))
    for k, n in sorted(missed.items()):
        print(f'  not counted: {k}: {n}')
    for k, n in sorted(unfired.items()):
        print(f'  not fired (trigger never came, or no target): {k}: {n}')
    total = sum(sum(t.values()) for t in table.values())
    tot = lambda key: sum(r['count'][key] for r in results)
    print(f'faults counted {total}, survived {survived} (in runs that passed every check)')
    print(f'rollbacks {tot("rollbacks")}, manager restarts {tot("restarts")}, '
          f'new plans {tot("replans")}')
    for r in results:
        for n in r['notes']:
            print(f'note: run seed {r["seed"]} ({r["mode"]}): {n}\n  reproduce: {r["repro"]}')
    for r in failed:
        print(f'FAILED run seed {r["seed"]} ({r["mode"]}): {"; ".join(r["bad"])}\n  reproduce: {r["repro"]}')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
