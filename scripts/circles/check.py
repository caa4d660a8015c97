"""Finds circles of imports between the files of each crate (tests excluded): a file that
names another's items through `crate::`, `super::` or `self::` depends on it, and no two
files may depend on each other, directly or around a longer circle. (A module's own `mod`
declarations and re-exports are how Rust builds a crate, not dependencies.)"""
import os, re, sys
def expand(s):
    # expand a use tree "a::{b, c::{d}}" into paths
    s = s.strip()
    m = re.match(r'^(.*?)\{(.*)\}$', s, re.S)
    if not m: return [s]
    prefix, inner = m.group(1), m.group(2)
    parts, depth, cur = [], 0, ''
    for ch in inner:
        if ch == '{': depth += 1
        if ch == '}': depth -= 1
        if ch == ',' and depth == 0: parts.append(cur); cur = ''
        else: cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        p = p.strip()
        if p: out += [prefix + q for q in expand(p)]
    return out
def modpath(src, f):
    rel = os.path.relpath(f, src)[:-3].split('/')
    if rel[-1] in ('lib', 'main', 'mod'): rel = rel[:-1]
    return tuple(rel)
def strip_tests(text):
    i = re.search(r'#\[cfg\(test\)\]\s*mod tests\s*\{', text)
    return text[:i.start()] if i else text
bad = 0
for crate in sorted(os.listdir('crates')):
    src = os.path.join('crates', crate, 'src')
    if not os.path.isdir(src): continue
    files = {}
    for root, _, fs in os.walk(src):
        for f in fs:
            if f.endswith('.rs'): files[modpath(src, os.path.join(root, f))] = os.path.join(root, f)
    mods = set(files)
    test_mods = {m for m in mods if 'tests' in m or m[-1:] == ('testing',)}
    graph = {m: set() for m in mods}
    for m, f in files.items():
        if m in test_mods: continue
        text = strip_tests(open(f).read())
        text = re.sub(r'//.*', '', text)
        paths = []
        for u in re.findall(r'\buse\s+([^;]+);', text):
            paths += expand(re.sub(r'\s+', '', u))
        paths += re.findall(r'\b((?:crate|super|self)(?:::\w+)+)', text)
        for p in paths:
            segs = p.split('::')
            if segs[0] == 'crate': base, rest = (), segs[1:]
            elif segs[0] == 'super':
                base = m[:-1] if files[m].endswith('mod.rs') is False and not files[m].endswith('lib.rs') else m[:-1]
                # super from a file module foo/bar.rs -> parent module foo
                base = m[:-1]; rest = segs[1:]
                while rest and rest[0] == 'super': base = base[:-1]; rest = rest[1:]
            elif segs[0] == 'self': base, rest = m, segs[1:]
            else: continue
            target = base
            for s in rest:
                if target + (s,) in mods: target = target + (s,)
                else: break
            if target != m and target not in test_mods and target in mods:
                # a parent referencing a child it declares through `mod` is not counted here (mod decls are not use)
                graph[m].add(target)
    # find cycles via Tarjan
    index, low, stack, on, sccs, i = {}, {}, [], set(), [], [0]
    def strong(v):
        index[v] = low[v] = i[0]; i[0] += 1; stack.append(v); on.add(v)
        for w in graph[v]:
            if w not in index: strong(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: sccs.append(comp)
    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index: strong(v)
    for c in sccs:
        bad += 1
        names = sorted('/'.join(x) or 'lib' for x in c)
        print(f"{crate}: circle {names}")
        for x in c:
            print('   ', '/'.join(x) or 'lib', '->', sorted('/'.join(y) or 'lib' for y in graph[x] if y in c))
sys.exit(1 if bad else 0)
