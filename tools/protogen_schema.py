"""protogen_schema.py — the schema model protogen.py generates from: parsing and checking
src/proto/kafka.schema (the language is in docs/protocol.md) into Api, Struct and Field
objects, and the primitive types' table. Errors are SchemaError with file:line.
"""
import re

import protogen_mirror

PRIMS = {
    # name: (C type, reader/writer suffix, fixed size or None, format call)
    'int8': ('int8_t', 'i8', 1),
    'int16': ('int16_t', 'i16', 2),
    'int32': ('int32_t', 'i32', 4),
    'int64': ('int64_t', 'i64', 8),
    'uint16': ('uint16_t', 'u16', 2),
    'varint': ('int32_t', 'varint', 1),
    'varlong': ('int64_t', 'varlong', 1),
    'float64': ('double', 'f64', 8),
    'bool': ('bool', 'bool', 1),
    'uuid': ('st_kuuid_t', 'uuid', 16),
    'string': ('st_kstr_t', 'str', None),
    'bytes': ('st_kbytes_t', 'bytes', None),
    'records': ('st_krecords_t', 'records', None),
}
INTS = {'int8', 'int16', 'int32', 'int64', 'uint16', 'varint', 'varlong'}
C_KEYWORDS = set('''auto break case char const continue default do double else enum extern float
for goto if inline int long register restrict return short signed sizeof static struct switch
typedef union unsigned void volatile while bool true false'''.split())

INT_LIMITS = {
    'int8': (-2**7, 2**7 - 1), 'int16': (-2**15, 2**15 - 1), 'int32': (-2**31, 2**31 - 1),
    'int64': (-2**63, 2**63 - 1), 'uint16': (0, 2**16 - 1), 'varint': (-2**31, 2**31 - 1),
    'varlong': (-2**63, 2**63 - 1),
}


class SchemaError(Exception):
    pass


def parse_versions(s, where):
    """'3+' -> (3, None); '2-5' -> (2, 5); '4' -> (4, 4); 'none' -> None."""
    if s == 'none':
        return None
    m = re.fullmatch(r'(\d+)\+', s)
    if m:
        return (int(m.group(1)), None)
    m = re.fullmatch(r'(\d+)-(\d+)', s)
    if m and int(m.group(1)) <= int(m.group(2)):
        return (int(m.group(1)), int(m.group(2)))
    m = re.fullmatch(r'(\d+)', s)
    if m:
        return (int(s), int(s))
    raise SchemaError('%s: bad version range %r' % (where, s))


def vin(rng, v):
    return rng is not None and v >= rng[0] and (rng[1] is None or v <= rng[1])


def snake(name):
    n = re.sub('([A-Z]+)([A-Z][a-z])', r'\1_\2', name)
    n = re.sub('([a-z0-9])([A-Z])', r'\1_\2', n)
    return n.lower()


class Field:
    def __init__(self, name, typ, is_array, versions, nullable, default, tag, where):
        self.name, self.typ, self.is_array = name, typ, is_array
        self.versions, self.nullable, self.default, self.tag = versions, nullable, default, tag
        self.where = where
        self.struct = None  # Struct for struct-typed fields

    @property
    def prim(self):
        return self.struct is None


class Struct:
    def __init__(self, api, kind, sname):
        self.api, self.kind, self.sname = api, kind, sname
        self.fields = []
        base = '%s_%s' % (api.snake, kind)
        self.prefix = base + ('_' + sname if sname else '')
        self.ctype = 'st_kp_%s_t' % self.prefix

    def regular(self):
        return [f for f in self.fields if f.tag is None]

    def tagged(self):
        return sorted([f for f in self.fields if f.tag is not None], key=lambda f: f.tag)


class Api:
    def __init__(self, name, key, versions, flexible, where):
        self.name, self.key = name, key
        self.snake = snake(name)
        if versions is None or versions[1] is None:
            raise SchemaError('%s: an API needs a closed version range' % where)
        self.min, self.max = versions
        self.flex = None if flexible is None else flexible[0]
        if flexible is not None and flexible[1] is not None:
            raise SchemaError('%s: flexible must be N+ or none' % where)
        self.req = Struct(self, 'req', '')
        self.resp = Struct(self, 'resp', '')
        self.structs = {'req': {}, 'resp': {}}
        self.mirror = None  # (tokens, where) until check_api resolves it into a Mirror

    def versions(self):
        return range(self.min, self.max + 1)

    def is_flex(self, v):
        return self.flex is not None and v >= self.flex


def parse_schema(path):
    apis = []
    api = None
    kind = None
    stack = []  # (indent, Struct)
    with open(path) as fh:
        lines = fh.read().split('\n')
    for lineno, raw in enumerate(lines, 1):
        where = '%s:%d' % (path, lineno)
        line = raw.split('#', 1)[0].rstrip()
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(' '))
        if '\t' in line:
            raise SchemaError('%s: tabs are not allowed' % where)
        toks = line.split()
        if indent == 0:
            if toks[0] == 'api':
                attrs = dict(t.split('=', 1) for t in toks[2:])
                if set(attrs) != {'key', 'versions', 'flexible'}:
                    raise SchemaError('%s: api needs key=, versions=, flexible=' % where)
                api = Api(toks[1], int(attrs['key']), parse_versions(attrs['versions'], where),
                          parse_versions(attrs['flexible'], where), where)
                apis.append(api)
                kind = None
            elif toks[0] == 'mirror':
                if api is None:
                    raise SchemaError('%s: mirror outside an api' % where)
                if api.mirror is not None:
                    raise SchemaError('%s: one mirror per api' % where)
                api.mirror = (toks[1:], where)
                kind = None
            elif toks[0] in ('request', 'response') and len(toks) == 1:
                if api is None:
                    raise SchemaError('%s: %s outside an api' % (where, toks[0]))
                kind = 'req' if toks[0] == 'request' else 'resp'
                stack = [(0, api.req if kind == 'req' else api.resp)]
            else:
                raise SchemaError('%s: expected api, request or response' % where)
            continue
        if kind is None:
            raise SchemaError('%s: field outside request/response' % where)
        while stack and indent <= stack[-1][0]:
            stack.pop()
        if not stack:
            raise SchemaError('%s: bad indentation' % where)
        parent = stack[-1][1]
        if len(toks) < 3:
            raise SchemaError('%s: a field needs: name type versions' % where)
        name, typ, vers = toks[0], toks[1], toks[2]
        if not re.fullmatch(r'[a-z][a-z0-9_]*', name) or name in C_KEYWORDS:
            raise SchemaError('%s: bad field name %r' % (where, name))
        attrs = {}
        for t in toks[3:]:
            if '=' not in t:
                raise SchemaError('%s: bad attribute %r' % (where, t))
            k, val = t.split('=', 1)
            if k not in ('nullable', 'default', 'tag') or k in attrs:
                raise SchemaError('%s: bad attribute %r' % (where, t))
            attrs[k] = val
        is_array = typ.startswith('[]')
        base = typ[2:] if is_array else typ
        f = Field(name, base, is_array, parse_versions(vers, where),
                  parse_versions(attrs['nullable'], where) if 'nullable' in attrs else None,
                  attrs.get('default'), int(attrs['tag']) if 'tag' in attrs else None, where)
        if any(g.name == name for g in parent.fields):
            raise SchemaError('%s: duplicate field %r' % (where, name))
        parent.fields.append(f)
        if base not in PRIMS:
            if not re.fullmatch(r'[a-z][a-z0-9_]*', base):
                raise SchemaError('%s: bad struct name %r' % (where, base))
            if base in api.structs[kind]:
                raise SchemaError('%s: struct %r already defined in this message' % (where, base))
            s = Struct(api, kind, base)
            api.structs[kind][base] = s
            f.struct = s
            stack.append((indent, s))
    for a in apis:
        check_api(a)
    keys = [a.key for a in apis]
    if len(set(keys)) != len(keys):
        raise SchemaError('duplicate api key')
    return apis


def check_struct(api, s, outer):
    """Validates fields; outer is the version range the struct itself exists in."""
    for f in s.fields:
        w = f.where
        if f.versions is None:
            raise SchemaError('%s: field present in no version' % w)
        present = [v for v in api.versions() if vin(f.versions, v) and (outer is None or vin(outer, v))]
        if not present:
            raise SchemaError('%s: field %s exists in no valid version of %s' % (w, f.name, api.name))
        if f.tag is not None:
            if not all(api.is_flex(v) for v in present):
                raise SchemaError('%s: tagged field outside flexible versions' % w)
            if f.typ == 'records':
                raise SchemaError('%s: records cannot be tagged' % w)
        if f.nullable is not None and f.prim and f.typ not in ('string', 'bytes', 'records') \
                and not f.is_array:
            raise SchemaError('%s: only strings, bytes, records and arrays are nullable' % w)
        if f.struct is not None and not f.is_array and f.nullable is not None and f.tag is not None:
            raise SchemaError('%s: a nullable struct field cannot be tagged' % w)
        d = f.default
        if d is not None:
            if f.is_array or f.struct is not None:
                if d != 'null':
                    raise SchemaError('%s: arrays take only default=null' % w)
            elif f.typ in INTS:
                try:
                    val = int(d, 0)
                except ValueError:
                    raise SchemaError('%s: bad integer default %r' % (w, d))
                lo, hi = INT_LIMITS[f.typ]
                if not lo <= val <= hi:
                    raise SchemaError('%s: default out of range' % w)
            elif f.typ == 'bool':
                if d not in ('true', 'false'):
                    raise SchemaError('%s: bool default must be true or false' % w)
            elif f.typ == 'float64':
                float(d)
            elif f.typ == 'string':
                if d not in ('null', '""'):
                    raise SchemaError('%s: string default must be null or ""' % w)
            elif d != 'null':
                raise SchemaError('%s: unsupported default %r' % (w, d))
            if d == 'null':
                for v in present:
                    if not vin(f.nullable, v):
                        raise SchemaError('%s: default null but not nullable at v%d' % (w, v))
        if f.struct is not None:
            inner = f.versions if outer is None else intersect(outer, f.versions)
            check_struct(api, f.struct, inner)


def intersect(a, b):
    lo = max(a[0], b[0])
    his = [h for h in (a[1], b[1]) if h is not None]
    return (lo, min(his) if his else None)


def check_api(api):
    check_struct(api, api.req, None)
    check_struct(api, api.resp, None)
    if api.mirror is not None:
        try:
            api.mirror = protogen_mirror.Mirror(api, *api.mirror)
        except ValueError as e:
            raise SchemaError(str(e))
