#!/usr/bin/env python3
"""protogen.py — turns src/proto/kafka.schema into C codecs (kafka_gen.h, kafka_gen.c).

Usage: protogen.py SCHEMA OUTDIR

The schema language is described in docs/protocol.md and at the top of kafka.schema. For every
API the generator emits, for the request and for the response, a C struct per message and per
nested struct, and:

    void st_kp_<api>_<req|resp>[_<struct>]_init(T *)      set every field to its default
    int  st_kp_<api>_<req|resp>_decode(st_kreader_t *, int16_t version, T *out)
    int  st_kp_<api>_<req|resp>_encode(st_kwriter_t *, int16_t version, const T *in)

plus the API table, generic dispatch (decode/encode/format/fill by api key) and a deterministic
filler used by the tests. For an API with a `mirror` line (topic x partition APIs), also:

    int32_t st_kp_<api>_flatten(arena, req, &items)        the request's partitions, flat
    int     st_kp_<api>_skeleton(arena, req, resp, items)  the response mirroring the request
    int32_t st_kp_<api>_mirror(arena, req, resp, &items)   both
    int     st_kp_<api>_req_build(arena, req, items, n)    a request from items (clients)
(protogen_mirror.py), and its one-level form `st_kp_<api>_skeleton(arena, req, resp)`. The
schema's parser and checks are in protogen_schema.py. Python 3 standard library only; output is
deterministic.
"""
import os
import sys

import protogen_mirror

from protogen_schema import INTS, PRIMS, SchemaError, parse_schema, vin


# ---------------------------------------------------------------------------------------------
# Code generation helpers


def vcond(api, rng):
    """C condition for 'version in rng' given v is within the API's valid range."""
    if rng is None:
        return 'false'
    parts = []
    if rng[0] > api.min:
        parts.append('v >= %d' % rng[0])
    if rng[1] is not None and rng[1] < api.max:
        parts.append('v <= %d' % rng[1])
    if rng[0] > api.max or (rng[1] is not None and rng[1] < api.min):
        return 'false'
    return ' && '.join(parts) if parts else 'true'


def flex_cond(api):
    if api.flex is None or api.flex > api.max:
        return 'false'
    if api.flex <= api.min:
        return 'true'
    return 'v >= %d' % api.flex


def c_int(typ, val):
    if typ in ('int64', 'varlong'):
        if val == -2**63:
            return 'INT64_MIN'
        if val == 2**63 - 1:
            return 'INT64_MAX'
        return 'INT64_C(%d)' % val
    if typ in ('int32', 'varint') and val == -2**31:
        return 'INT32_MIN'
    if typ in ('int32', 'varint') and val == 2**31 - 1:
        return 'INT32_MAX'
    return str(val)


def default_expr(f):
    """C expression for the field's default value (scalars only)."""
    d = f.default
    t = f.typ
    if t in INTS:
        return c_int(t, int(d, 0) if d is not None else 0)
    if t == 'bool':
        return d if d is not None else 'false'
    if t == 'float64':
        return repr(float(d)) if d is not None else '0.0'
    if t == 'string':
        return 'ST_KSTR_NULL' if d == 'null' else 'ST_KSTR_EMPTY'
    if t == 'bytes':
        return 'ST_KBYTES_NULL' if d == 'null' else '((st_kbytes_t){NULL, 0})'
    if t == 'records':
        return '((st_krecords_t){NULL, -1, NULL})'
    raise AssertionError(t)


def nullable_struct(f):
    """A single struct field that may be null (Kafka writes an int8 marker before it: -1 null,
    1 present); its C struct carries `<name>_null` beside the struct."""
    return f.struct is not None and not f.is_array and f.nullable is not None


def nonzero_default(f):
    """True when memset(0) does not already give the default."""
    if f.is_array:
        return f.default == 'null'
    if f.struct is not None:
        return True
    t = f.typ
    if t in INTS:
        return f.default is not None and int(f.default, 0) != 0
    if t == 'bool':
        return f.default == 'true'
    if t == 'float64':
        return f.default is not None and float(f.default) != 0.0
    if t == 'uuid':
        return False
    return True  # strings, bytes, records carry a length that is not 0 or a non-NULL pointer


def is_default_expr(f, e):
    """C expression: the value e (an lvalue of the field) equals the field's default."""
    if f.is_array:
        return '%s_count %s 0' % (e, '<' if f.default == 'null' else '==')
    if nullable_struct(f) and f.default == 'null':
        return '%s_null' % e
    if f.struct is not None:
        return '%s_is_default(v, &%s)' % (f.struct.prefix, e)
    t = f.typ
    if t == 'string':
        return '%s.len %s' % (e, '< 0' if f.default == 'null' else '== 0')
    if t == 'bytes':
        return '%s.len %s' % (e, '< 0' if f.default == 'null' else '== 0')
    if t == 'records':
        return '%s.len < 0' % e
    if t == 'uuid':
        return 'st_kuuid_is_zero(&%s)' % e
    return '%s == %s' % (e, default_expr(f))


def prim_min_size(t, flex):
    if t == 'string':
        return '(%s ? 1 : 2)' % flex if flex not in ('true', 'false') else ('1' if flex == 'true' else '2')
    if t in ('bytes', 'records'):
        return '(%s ? 1 : 4)' % flex if flex not in ('true', 'false') else ('1' if flex == 'true' else '4')
    return str(PRIMS[t][2])


def struct_min_size(api, s, v):
    """Smallest encoding of struct s at version v, in bytes."""
    n = 0
    flex = api.is_flex(v)
    for f in s.regular():
        if not vin(f.versions, v):
            continue
        if f.is_array:
            n += 1 if flex else 4
        elif nullable_struct(f) and vin(f.nullable, v):
            n += 1
        elif f.struct is not None:
            n += struct_min_size(api, f.struct, v)
        elif f.typ == 'string':
            n += 1 if flex else 2
        elif f.typ in ('bytes', 'records'):
            n += 1 if flex else 4
        else:
            n += PRIMS[f.typ][2]
    if flex:
        n += 1
    return max(n, 1)


def walk(s):
    """Post-order list of the structs nested in s, then s."""
    out = []
    for f in s.fields:
        if f.struct is not None:
            out.extend(walk(f.struct))
    out.append(s)
    return out


def field_doc(f):
    parts = []
    r = f.versions
    parts.append('v%d+' % r[0] if r[1] is None else ('v%d' % r[0] if r[0] == r[1] else 'v%d-%d' % r))
    if f.nullable is not None:
        n = f.nullable
        parts.append('nullable ' + ('v%d+' % n[0] if n[1] is None else 'v%d-%d' % n))
    if f.tag is not None:
        parts.append('tag %d' % f.tag)
    if f.default is not None:
        parts.append('default %s' % f.default)
    return ', '.join(parts)


class Out:
    def __init__(self):
        self.lines = []

    def __call__(self, s=''):
        self.lines.append(s)

    def text(self):
        return '\n'.join(self.lines) + '\n'


# ---------------------------------------------------------------------------------------------
# Header


def gen_header(apis):
    o = Out()
    o('/*')
    o(' * kafka_gen.h — Kafka protocol messages, GENERATED by tools/protogen.py from')
    o(' * src/proto/kafka.schema. Do not edit; change the schema or the generator.')
    o(' *')
    o(' * Naming. Per API <api> (snake_case of the protocol name: metadata, api_versions, ...):')
    o(' *   st_kp_<api>_req_t / st_kp_<api>_resp_t      the request and response bodies')
    o(' *   st_kp_<api>_<req|resp>_<struct>_t           a nested struct; <struct> is the singular')
    o(' *       of the array field holding it (topics -> topic, partitions -> partition,')
    o(' *       responses -> response), or the field name for a single struct field')
    o(' *       (current_leader). Where two fields of one message would give the same name, the')
    o(' *       inner one is prefixed with its parent (offset_fetch: group_topic).')
    o(' * Fields keep the protocol\'s snake_case names. An array field foo is `T *foo; int32_t')
    o(' * foo_count;` (count -1: null array). Strings, bytes and records have len -1 for null and')
    o(' * point into the decoded frame. Each field\'s comment gives the versions it exists in,')
    o(' * where it is nullable, its tag if tagged, and its default if not 0 / "" / empty.')
    o(' *')
    o(' * Functions (0 or a negative code from base/err.h):')
    o(' *   void st_kp_<name>_init(T *)   sets every field to its default (every struct type)')
    o(' *   int  st_kp_<api>_req_decode(st_kreader_t *, int16_t version, st_kp_<api>_req_t *)')
    o(' *   int  st_kp_<api>_req_encode(st_kwriter_t *, int16_t version, const st_kp_<api>_req_t *)')
    o(' *   (and _resp_). Fields absent at a version decode to their default and are not encoded.')
    o(' *   Decoding allocates arrays from r->arena; a version outside the API\'s range gives')
    o(' *   ST_E_UNSUPPORTED. Decoders do not require the input to be fully consumed; callers')
    o(' *   that need it compare r->p with r->end. Unknown tagged fields are skipped.')
    o(' *')
    o(' * Topic x partition APIs (a `mirror` line in the schema) also get st_kp_<api>_item_t and')
    o(' * st_kp_<api>_flatten / _skeleton / _mirror / _req_build (docs/protocol.md): handlers')
    o(' * take the request\'s partitions as one flat array linked to a response skeleton.')
    o(' *')
    o(' * Owned by the shard that decodes or encodes; no global state.')
    o(' */')
    o('#ifndef ST_PROTO_KAFKA_GEN_H')
    o('#define ST_PROTO_KAFKA_GEN_H')
    o()
    o('#include <stdbool.h>')
    o('#include <stddef.h>')
    o('#include <stdint.h>')
    o()
    o('#include "base/arena.h"')
    o('#include "base/buf.h"')
    o('#include "proto/kreader.h"')
    o('#include "proto/ktypes.h"')
    o('#include "proto/kwriter.h"')
    o()
    o('/* API keys. */')
    o('enum {')
    for a in sorted(apis, key=lambda a: a.key):
        o('    ST_KP_API_%s = %d,' % (a.snake.upper(), a.key))
    o('};')
    o()
    o('/* Supported version ranges; FLEXIBLE is the first flexible version (-1: none). */')
    for a in sorted(apis, key=lambda a: a.key):
        u = a.snake.upper()
        o('#define ST_KP_%s_MIN_VERSION %d' % (u, a.min))
        o('#define ST_KP_%s_MAX_VERSION %d' % (u, a.max))
        o('#define ST_KP_%s_FLEXIBLE_VERSION %d' % (u, -1 if a.flex is None else a.flex))
    o()
    o('/* One row per API this build speaks. */')
    o('typedef struct st_kp_api {')
    o('    int16_t api_key;')
    o('    const char *name;          /* protocol name, "Metadata" */')
    o('    int16_t min_version;')
    o('    int16_t max_version;')
    o('    int16_t flexible_version;  /* first flexible version, -1 if none */')
    o('    size_t req_size;           /* sizeof the request struct */')
    o('    size_t resp_size;          /* sizeof the response struct */')
    o('} st_kp_api_t;')
    o()
    o('extern const st_kp_api_t st_kp_apis[]; /* sorted by api_key */')
    o('extern const size_t st_kp_apis_count;')
    o()
    o('/* The row for api_key, or NULL when this build does not speak it. */')
    o('const st_kp_api_t *st_kp_api_find(int16_t api_key);')
    o()
    o('/* Deterministic filler (tests, fuzz seeds): sets every field present at a version to a')
    o(' * value other than its default, arrays to two elements (or null, in nulls mode, where the')
    o(' * field is nullable). Memory comes from arena. */')
    o('typedef struct st_kp_fill {')
    o('    st_arena_t *arena;')
    o('    uint32_t n;  /* counter the values derive from */')
    o('    bool nulls;  /* set nullable fields to null instead */')
    o('} st_kp_fill_t;')
    o()
    for a in apis:
        o('/* ' + '-' * 94 + ' */')
        o('/* %s (api key %d), versions %d-%d, %s */' % (
            a.name, a.key, a.min, a.max,
            'flexible from v%d' % a.flex if a.flex is not None else 'never flexible'))
        o()
        for top in (a.req, a.resp):
            for s in walk(top):
                o('typedef struct %s {' % s.ctype[:-2])
                if not s.fields:
                    o('    char unused_; /* no fields */')
                for f in s.fields:
                    ct = f.struct.ctype if f.struct else PRIMS[f.typ][0]
                    doc = field_doc(f)
                    if f.is_array:
                        o('    %s *%s; /* %s */' % (ct, f.name, doc))
                        o('    int32_t %s_count;' % f.name)
                    else:
                        o('    %s %s; /* %s */' % (ct, f.name, doc))
                    if nullable_struct(f):
                        o('    bool %s_null; /* %s is null */' % (f.name, f.name))
                o('} %s;' % s.ctype)
                o()
            for s in walk(top):
                o('void st_kp_%s_init(%s *o);' % (s.prefix, s.ctype))
            o('int st_kp_%s_decode(st_kreader_t *r, int16_t version, %s *out);' % (top.prefix, top.ctype))
            o('int st_kp_%s_encode(st_kwriter_t *w, int16_t version, const %s *in);' % (top.prefix, top.ctype))
            o()
        if a.mirror is not None:
            protogen_mirror.gen_header(o, a)
    o('/* ' + '-' * 94 + ' */')
    o('/* Generic dispatch by api key. ST_E_UNSUPPORTED for an unknown api or version. */')
    o()
    o('/* Decodes a body into a struct allocated from r->arena; *out points to it. */')
    o('int st_kp_req_decode_any(st_kreader_t *r, int16_t api_key, int16_t version, void **out);')
    o('int st_kp_resp_decode_any(st_kreader_t *r, int16_t api_key, int16_t version, void **out);')
    o('int st_kp_req_encode_any(st_kwriter_t *w, int16_t api_key, int16_t version, const void *msg);')
    o('int st_kp_resp_encode_any(st_kwriter_t *w, int16_t api_key, int16_t version, const void *msg);')
    o('/* Appends the message as one line of JSON-like text (fields present at version only). */')
    o('int st_kp_req_format(st_buf_t *b, int16_t api_key, int16_t version, const void *msg);')
    o('int st_kp_resp_format(st_buf_t *b, int16_t api_key, int16_t version, const void *msg);')
    o('/* Builds a filled message (see st_kp_fill_t) allocated from f->arena. */')
    o('int st_kp_req_fill_any(st_kp_fill_t *f, int16_t api_key, int16_t version, void **out);')
    o('int st_kp_resp_fill_any(st_kp_fill_t *f, int16_t api_key, int16_t version, void **out);')
    o('/* Whether the response of api_key at version begins with throttle_time_ms (an int32), so a')
    o(' * throttle decided outside the handler can be written into the encoded body. */')
    o('bool st_kp_resp_throttle_first(int16_t api_key, int16_t version);')
    o()
    o('#endif')
    return o.text()


# ---------------------------------------------------------------------------------------------
# Source


def reader_call(f, R, flex, nullable, dst):
    t = f.typ
    suf = PRIMS[t][1]
    if t in ('string', 'bytes', 'records'):
        return 'st_kreader_%s(%s, %s, %s, &%s)' % (suf, R, flex, nullable, dst)
    return 'st_kreader_%s(%s, &%s)' % (suf, R, dst)


def gen_decode_field(o, a, f, R, ind):
    fl = flex_cond(a)
    nl = vcond(a, f.nullable) if f.nullable else 'false'
    e = 'o->' + f.name
    if f.is_array:
        if f.struct:
            s = f.struct
            sizes = [struct_min_size(a, s, v) for v in a.versions()]
            if len(set(sizes)) == 1:
                minsz = str(sizes[0])
            else:
                minsz = 'minsz_%s[v - %d]' % (s.prefix, a.min)
        else:
            minsz = prim_min_size(f.typ, fl)
        o(ind + '{')
        o(ind + '    int32_t n;')
        o(ind + '    if ((rc = st_kreader_count(%s, %s, %s, %s, &n)) < 0)' % (R, fl, nl, minsz))
        o(ind + '        return rc;')
        o(ind + '    %s_count = n;' % e)
        o(ind + '    if (n > 0) {')
        o(ind + '        if (!(%s = st_kreader_alloc(%s, (size_t)n, sizeof *%s)))' % (e, R, e))
        o(ind + '            return -ENOMEM;')
        o(ind + '        for (int32_t i = 0; i < n; i++)')
        if f.struct:
            o(ind + '            if ((rc = %s_decode(%s, v, &%s[i])) < 0)' % (f.struct.prefix, R, e))
        else:
            o(ind + '            if ((rc = %s) < 0)' % reader_call(f, R, fl, 'false', e + '[i]'))
        o(ind + '                return rc;')
        o(ind + '    }')
        o(ind + '}')
    elif f.struct and nullable_struct(f):
        o(ind + '%s_null = false;' % e)
        o(ind + 'if (%s) {' % nl)
        o(ind + '    int8_t marker;')
        o(ind + '    if ((rc = st_kreader_i8(%s, &marker)) < 0)' % R)
        o(ind + '        return rc;')
        o(ind + '    %s_null = marker < 0;' % e)
        o(ind + '}')
        o(ind + 'if (!%s_null && (rc = %s_decode(%s, v, &%s)) < 0)' % (e, f.struct.prefix, R, e))
        o(ind + '    return rc;')
    elif f.struct:
        o(ind + 'if ((rc = %s_decode(%s, v, &%s)) < 0)' % (f.struct.prefix, R, e))
        o(ind + '    return rc;')
    else:
        o(ind + 'if ((rc = %s) < 0)' % reader_call(f, R, fl, nl, e))
        o(ind + '    return rc;')


def writer_stmt(o, f, flex, nullable, val, ind):
    t = f.typ
    suf = PRIMS[t][1]
    if t == 'string' or t == 'bytes':
        o(ind + 'if ((rc = st_kwriter_%s(w, %s, %s, %s)) < 0)' % (suf, flex, nullable, val))
        o(ind + '    return rc;')
    elif t == 'records':
        o(ind + 'if ((rc = st_kwriter_records(w, %s, %s, &%s)) < 0)' % (flex, nullable, val))
        o(ind + '    return rc;')
    elif t == 'uuid':
        o(ind + 'st_kwriter_uuid(w, &%s);' % val)
    else:
        o(ind + 'st_kwriter_%s(w, %s);' % (suf, val))


def gen_encode_field(o, a, f, ind):
    fl = flex_cond(a)
    nl = vcond(a, f.nullable) if f.nullable else 'false'
    e = 'o->' + f.name
    if f.is_array:
        o(ind + 'if ((rc = st_kwriter_count(w, %s, %s, %s_count, %s)) < 0)' % (fl, nl, e, e))
        o(ind + '    return rc;')
        o(ind + 'for (int32_t i = 0; i < %s_count; i++) {' % e)
        if f.struct:
            o(ind + '    if ((rc = %s_encode(w, v, &%s[i])) < 0)' % (f.struct.prefix, e))
            o(ind + '        return rc;')
        else:
            writer_stmt(o, f, fl, 'false', e + '[i]', ind + '    ')
        o(ind + '}')
    elif f.struct and nullable_struct(f):
        o(ind + 'if (%s)' % nl)
        o(ind + '    st_kwriter_i8(w, %s_null ? -1 : 1);' % e)
        o(ind + 'if ((!(%s) || !%s_null) && (rc = %s_encode(w, v, &%s)) < 0)' % (nl, e, f.struct.prefix, e))
        o(ind + '    return rc;')
    elif f.struct:
        o(ind + 'if ((rc = %s_encode(w, v, &%s)) < 0)' % (f.struct.prefix, e))
        o(ind + '    return rc;')
    else:
        writer_stmt(o, f, fl, nl, e, ind)


def fmt_value(o, f, val, ind):
    t = f.typ
    if f.struct:
        o(ind + '%s_format(b, v, &%s);' % (f.struct.prefix, val))
    elif t in INTS:
        o(ind + 'st_kfmt_i64(b, (int64_t)%s);' % val)
    elif t == 'bool':
        o(ind + 'st_kfmt_bool(b, %s);' % val)
    elif t == 'float64':
        o(ind + 'st_kfmt_f64(b, %s);' % val)
    elif t == 'string':
        o(ind + 'st_kfmt_str(b, %s);' % val)
    elif t == 'bytes':
        o(ind + 'st_kfmt_bytes(b, %s.ptr, %s.len);' % (val, val))
    elif t == 'records':
        o(ind + 'st_kfmt_records(b, &%s);' % val)
    elif t == 'uuid':
        o(ind + 'st_kfmt_uuid(b, &%s);' % val)
    else:
        raise AssertionError(t)


def fill_value(o, f, val, ind):
    t = f.typ
    if f.struct:
        o(ind + '%s_fill(f, v, &%s);' % (f.struct.prefix, val))
    elif t in ('int8', 'int16', 'int32', 'varint'):
        o(ind + '%s = (%s)fill_int(f);' % (val, PRIMS[t][0]))
    elif t == 'uint16':
        o(ind + '%s = (uint16_t)(7 + fill_next(f) %% 97);' % val)
    elif t in ('int64', 'varlong'):
        o(ind + '%s = fill_int(f) * INT64_C(1000000007);' % val)
    elif t == 'bool':
        o(ind + '%s = !(%s);' % (val, default_expr(f)))
    elif t == 'float64':
        o(ind + '%s = (double)fill_int(f) + 0.5;' % val)
    elif t == 'string':
        o(ind + '%s = fill_str(f);' % val)
    elif t == 'bytes':
        o(ind + '%s = fill_bytes(f);' % val)
    elif t == 'records':
        o(ind + '{')
        o(ind + '    st_kbytes_t fb = fill_bytes(f);')
        o(ind + '    %s = (st_krecords_t){fb.ptr, fb.len, NULL};' % val)
        o(ind + '}')
    elif t == 'uuid':
        o(ind + 'fill_uuid(f, &%s);' % val)
    else:
        raise AssertionError(t)


def guarded(o, cond, ind, body):
    """Emits body(ind) under `if (cond)` unless cond is trivially true."""
    if cond == 'true':
        body(ind)
    elif cond == 'false':
        return
    else:
        o(ind + 'if (%s) {' % cond)
        body(ind + '    ')
        o(ind + '}')


def gen_struct(o, a, s, need_isdef, public_prefix):
    P = s.prefix
    T = s.ctype
    fl = flex_cond(a)

    # init
    o('void st_kp_%s_init(%s *o)' % (P, T))
    o('{')
    o('    memset(o, 0, sizeof *o);')
    for f in s.fields:
        if not nonzero_default(f):
            continue
        if f.is_array:
            o('    o->%s_count = -1;' % f.name)
        elif f.struct:
            o('    st_kp_%s_init(&o->%s);' % (f.struct.prefix, f.name))
            if nullable_struct(f) and f.default == 'null':
                o('    o->%s_null = true;' % f.name)
        else:
            o('    o->%s = %s;' % (f.name, default_expr(f)))
    o('}')
    o()

    # is_default (for tagged struct fields)
    if s in need_isdef:
        o('static bool %s_is_default(int16_t v, const %s *o)' % (P, T))
        o('{')
        o('    (void)v;')
        o('    (void)o;')
        conds = []
        for f in s.fields:
            c = vcond(a, f.versions)
            e = is_default_expr(f, 'o->' + f.name)
            if c == 'false':
                continue
            conds.append('(%s)' % e if c == 'true' else '(!(%s) || %s)' % (c, e))
        o('    return %s;' % (' &&\n           '.join(conds) if conds else 'true'))
        o('}')
        o()

    # decode
    o('static int %s_decode(st_kreader_t *r, int16_t v, %s *o)' % (P, T))
    o('{')
    o('    int rc = 0;')
    o('    (void)v;')
    o('    st_kp_%s_init(o);' % P)
    for f in s.regular():
        guarded(o, vcond(a, f.versions), '    ', lambda ind, f=f: gen_decode_field(o, a, f, 'r', ind))
    tagged = s.tagged()

    def dec_tags(ind):
        if not tagged:
            o(ind + 'if ((rc = st_kreader_skip_tags(r)) < 0)')
            o(ind + '    return rc;')
            return
        o(ind + 'uint32_t ntags;')
        o(ind + 'if ((rc = st_kreader_uvarint(r, &ntags)) < 0)')
        o(ind + '    return rc;')
        o(ind + 'for (uint32_t ti = 0; ti < ntags; ti++) {')
        o(ind + '    uint32_t tag;')
        o(ind + '    st_kreader_t sub;')
        o(ind + '    if ((rc = st_kreader_tag(r, &tag, &sub)) < 0)')
        o(ind + '        return rc;')
        o(ind + '    switch (tag) {')
        for f in tagged:
            o(ind + '    case %d:' % f.tag)
            guarded(o, vcond(a, f.versions), ind + '        ',
                    lambda i2, f=f: gen_decode_field(o, a, f, '&sub', i2))
            o(ind + '        break;')
        o(ind + '    default:')
        o(ind + '        break; /* unknown tags are skipped */')
        o(ind + '    }')
        o(ind + '}')
    guarded(o, fl, '    ', dec_tags)
    o('    return rc;')
    o('}')
    o()

    # encode
    o('static int %s_encode(st_kwriter_t *w, int16_t v, const %s *o)' % (P, T))
    o('{')
    o('    int rc = 0;')
    o('    (void)v;')
    o('    (void)o;')
    for f in s.regular():
        guarded(o, vcond(a, f.versions), '    ', lambda ind, f=f: gen_encode_field(o, a, f, ind))

    def enc_tags(ind):
        if not tagged:
            o(ind + 'st_kwriter_uvarint(w, 0);')
            return
        for f in tagged:
            c = vcond(a, f.versions)
            d = is_default_expr(f, 'o->' + f.name)
            o(ind + 'bool has_%s = %s;' % (f.name, '!(%s)' % d if c == 'true' else '(%s) && !(%s)' % (c, d)))
        o(ind + 'st_kwriter_uvarint(w, %s);' % ' + '.join('(uint32_t)has_%s' % f.name for f in tagged))
        for f in tagged:
            o(ind + 'if (has_%s) {' % f.name)
            o(ind + '    size_t at = st_kwriter_tag_begin(w, %d);' % f.tag)
            gen_encode_field(o, a, f, ind + '    ')
            o(ind + '    st_kwriter_tag_end(w, at);')
            o(ind + '}')
    guarded(o, fl, '    ', enc_tags)
    o('    return rc;')
    o('}')
    o()

    # format
    o('static void %s_format(st_buf_t *b, int16_t v, const %s *o)' % (P, T))
    o('{')
    o('    bool first = true;')
    o('    (void)v;')
    o('    (void)o;')
    o('    st_kfmt_raw(b, "{");')
    for f in s.fields:
        def body(ind, f=f):
            o(ind + 'st_kfmt_key(b, "%s", &first);' % f.name)
            e = 'o->' + f.name
            if f.is_array:
                o(ind + 'if (%s_count < 0) {' % e)
                o(ind + '    st_kfmt_raw(b, "null");')
                o(ind + '} else {')
                o(ind + '    st_kfmt_raw(b, "[");')
                o(ind + '    for (int32_t i = 0; i < %s_count; i++) {' % e)
                o(ind + '        if (i)')
                o(ind + '            st_kfmt_raw(b, ",");')
                fmt_value(o, f, e + '[i]', ind + '        ')
                o(ind + '    }')
                o(ind + '    st_kfmt_raw(b, "]");')
                o(ind + '}')
            elif nullable_struct(f):
                o(ind + 'if (%s_null)' % e)
                o(ind + '    st_kfmt_raw(b, "null");')
                o(ind + 'else')
                fmt_value(o, f, e, ind + '    ')
            else:
                fmt_value(o, f, e, ind)
        guarded(o, vcond(a, f.versions), '    ', body)
    o('    st_kfmt_raw(b, "}");')
    o('}')
    o()

    # fill
    o('static void %s_fill(st_kp_fill_t *f, int16_t v, %s *o)' % (P, T))
    o('{')
    o('    (void)v;')
    o('    (void)f;')
    o('    st_kp_%s_init(o);' % P)
    for fd in s.fields:
        def body(ind, fd=fd):
            e = 'o->' + fd.name
            nl = vcond(a, fd.nullable) if fd.nullable else 'false'
            nullable_here = fd.nullable is not None and nl != 'false'
            if fd.is_array:
                cnt = 'fill_count(f, %s)' % nl if nullable_here else 'fill_count(f, false)'
                o(ind + '%s_count = %s;' % (e, cnt))
                o(ind + 'if (%s_count > 0) {' % e)
                o(ind + '    %s = st_arena_zalloc(f->arena, (size_t)%s_count * sizeof *%s);' % (e, e, e))
                o(ind + '    if (!%s) {' % e)
                o(ind + '        %s_count = 0;' % e)
                o(ind + '    } else {')
                o(ind + '        for (int32_t i = 0; i < %s_count; i++) {' % e)
                fill_value(o, fd, e + '[i]', ind + '            ')
                o(ind + '        }')
                o(ind + '    }')
                o(ind + '}')
            elif nullable_struct(fd):
                fill_value(o, fd, e, ind)
                o(ind + '%s_null = f->nulls && (%s);' % (e, nl))
            elif nullable_here:
                o(ind + 'if (f->nulls && (%s)) {' % nl)
                o(ind + '    %s.len = -1;' % e)
                o(ind + '    %s.ptr = NULL;' % e)
                o(ind + '} else {')
                fill_value(o, fd, e, ind + '    ')
                o(ind + '}')
            else:
                fill_value(o, fd, e, ind)
        guarded(o, vcond(a, fd.versions), '    ', body)
    o('}')
    o()


def gen_source(apis):
    o = Out()
    o('/*')
    o(' * kafka_gen.c — Kafka protocol codecs, GENERATED by tools/protogen.py from')
    o(' * src/proto/kafka.schema. Do not edit; change the schema or the generator.')
    o(' *')
    o(' * Per struct: init (defaults), decode, encode, format, fill; the public entry points check')
    o(' * the version range and, for encode, the buffer\'s sticky out-of-memory flag. Nesting depth')
    o(' * is fixed by the schema (no recursion), and every array count is bounded by the bytes left.')
    o(' */')
    o('#include "proto/kafka_gen.h"')
    o()
    o('#include <errno.h>')
    o('#include <stdio.h>')
    o('#include <string.h>')
    o()
    o('#include "base/err.h"')
    o('#include "proto/kformat.h"')
    o()
    o('static inline uint32_t fill_next(st_kp_fill_t *f)')
    o('{')
    o('    return ++f->n;')
    o('}')
    o()
    o('/* A value in -103..-7 or 7..103: never 0, -1, -2, 1 or any other default in the schema. */')
    o('static inline int64_t fill_int(st_kp_fill_t *f)')
    o('{')
    o('    uint32_t n = fill_next(f);')
    o('    int64_t x = 7 + (int64_t)(n % 97);')
    o('    return (n & 1) ? -x : x;')
    o('}')
    o()
    o('static inline int32_t fill_count(st_kp_fill_t *f, bool nullable)')
    o('{')
    o('    return f->nulls && nullable ? -1 : 2;')
    o('}')
    o()
    o('static inline st_kstr_t fill_str(st_kp_fill_t *f)')
    o('{')
    o('    char *s = st_arena_alloc(f->arena, 16);')
    o('    if (!s)')
    o('        return ST_KSTR_EMPTY;')
    o('    int n = snprintf(s, 16, "s%u", (unsigned)fill_next(f));')
    o('    return (st_kstr_t){s, n};')
    o('}')
    o()
    o('static inline st_kbytes_t fill_bytes(st_kp_fill_t *f)')
    o('{')
    o('    uint32_t n = fill_next(f);')
    o('    int32_t len = 1 + (int32_t)(n % 7);')
    o('    uint8_t *p = st_arena_alloc(f->arena, (size_t)len);')
    o('    if (!p)')
    o('        return (st_kbytes_t){NULL, 0};')
    o('    for (int32_t i = 0; i < len; i++)')
    o('        p[i] = (uint8_t)(n + (uint32_t)i);')
    o('    return (st_kbytes_t){p, len};')
    o('}')
    o()
    o('static inline void fill_uuid(st_kp_fill_t *f, st_kuuid_t *u)')
    o('{')
    o('    uint32_t n = fill_next(f);')
    o('    for (int i = 0; i < 16; i++)')
    o('        u->b[i] = (uint8_t)(n * 31u + (uint32_t)i);')
    o('}')
    o()

    for a in apis:
        o('/* ' + '-' * 94 + ' */')
        o('/* %s */' % a.name)
        o()
        for top in (a.req, a.resp):
            # Structs whose is_default is needed: those of tagged struct fields, and their insides.
            need = set()

            def mark(s):
                need.add(s)
                for f in s.fields:
                    if f.struct and not f.is_array:
                        mark(f.struct)
            for s in walk(top):
                for f in s.fields:
                    if f.tag is not None and f.struct and not f.is_array:
                        mark(f.struct)
            # Minimum element sizes that vary by version.
            for s in walk(top):
                for f in s.fields:
                    if f.is_array and f.struct:
                        sizes = [struct_min_size(a, f.struct, v) for v in a.versions()]
                        if len(set(sizes)) > 1:
                            o('static const uint32_t minsz_%s[] = {%s};' % (
                                f.struct.prefix, ', '.join(map(str, sizes))))
                            o()
            for s in walk(top):
                gen_struct(o, a, s, need, top.prefix)
            P, T = top.prefix, top.ctype
            o('int st_kp_%s_decode(st_kreader_t *r, int16_t version, %s *out)' % (P, T))
            o('{')
            o('    if (version < %d || version > %d)' % (a.min, a.max))
            o('        return ST_E_UNSUPPORTED;')
            o('    return %s_decode(r, version, out);' % P)
            o('}')
            o()
            o('int st_kp_%s_encode(st_kwriter_t *w, int16_t version, const %s *in)' % (P, T))
            o('{')
            o('    if (version < %d || version > %d)' % (a.min, a.max))
            o('        return ST_E_UNSUPPORTED;')
            o('    int rc = %s_encode(w, version, in);' % P)
            o('    if (rc == 0 && w->buf->oom)')
            o('        rc = -ENOMEM;')
            o('    return rc;')
            o('}')
            o()
            for op, sig, call in (
                    ('decode', 'st_kreader_t *r, int16_t v, void *m', '%s_decode(r, v, m)'),
                    ('encode', 'st_kwriter_t *w, int16_t v, const void *m', 'st_kp_%s_encode(w, v, m)'),
                    ('format', 'st_buf_t *b, int16_t v, const void *m', None),
                    ('fill', 'st_kp_fill_t *f, int16_t v, void *m', None)):
                o('static int any_%s_%s(%s)' % (P, op, sig))
                o('{')
                if op == 'format':
                    o('    %s_format(b, v, m);' % P)
                    o('    return b->oom ? -ENOMEM : 0;')
                elif op == 'fill':
                    o('    %s_fill(f, v, m);' % P)
                    o('    return 0;')
                else:
                    o('    return %s;' % (call % P))
                o('}')
                o()
        if a.mirror is not None:
            protogen_mirror.gen_source(o, a)

    o('/* ' + '-' * 94 + ' */')
    o('/* Tables and dispatch */')
    o()
    sapis = sorted(apis, key=lambda a: a.key)
    o('const st_kp_api_t st_kp_apis[] = {')
    for a in sapis:
        o('    {%d, "%s", %d, %d, %d, sizeof(%s), sizeof(%s)},' % (
            a.key, a.name, a.min, a.max, -1 if a.flex is None else a.flex, a.req.ctype, a.resp.ctype))
    o('};')
    o('const size_t st_kp_apis_count = sizeof st_kp_apis / sizeof st_kp_apis[0];')
    o()
    o('typedef struct {')
    o('    int (*decode)(st_kreader_t *r, int16_t v, void *m);')
    o('    int (*encode)(st_kwriter_t *w, int16_t v, const void *m);')
    o('    int (*format)(st_buf_t *b, int16_t v, const void *m);')
    o('    int (*fill)(st_kp_fill_t *f, int16_t v, void *m);')
    o('} ops_t;')
    o()
    for kind in ('req', 'resp'):
        o('static const ops_t %s_ops[] = {' % kind)
        for a in sapis:
            P = '%s_%s' % (a.snake, kind)
            o('    {any_%s_decode, any_%s_encode, any_%s_format, any_%s_fill},' % (P, P, P, P))
        o('};')
        o()
    o('/* Index of api_key in st_kp_apis, or -1. */')
    o('static int api_index(int16_t api_key)')
    o('{')
    o('    switch (api_key) {')
    for i, a in enumerate(sapis):
        o('    case %d:' % a.key)
        o('        return %d;' % i)
    o('    default:')
    o('        return -1;')
    o('    }')
    o('}')
    o()
    o('const st_kp_api_t *st_kp_api_find(int16_t api_key)')
    o('{')
    o('    int i = api_index(api_key);')
    o('    return i < 0 ? NULL : &st_kp_apis[i];')
    o('}')
    o()
    o('/* Index of api_key if version is in its range, else -1. */')
    o('static int api_check(int16_t api_key, int16_t version)')
    o('{')
    o('    int i = api_index(api_key);')
    o('    if (i < 0 || version < st_kp_apis[i].min_version || version > st_kp_apis[i].max_version)')
    o('        return -1;')
    o('    return i;')
    o('}')
    o()
    for kind in ('req', 'resp'):
        size = 'req_size' if kind == 'req' else 'resp_size'
        o('int st_kp_%s_decode_any(st_kreader_t *r, int16_t api_key, int16_t version, void **out)' % kind)
        o('{')
        o('    int i = api_check(api_key, version);')
        o('    if (i < 0)')
        o('        return ST_E_UNSUPPORTED;')
        o('    void *m = st_arena_alloc(r->arena, st_kp_apis[i].%s);' % size)
        o('    if (!m)')
        o('        return -ENOMEM;')
        o('    *out = m;')
        o('    return %s_ops[i].decode(r, version, m);' % kind)
        o('}')
        o()
        o('int st_kp_%s_encode_any(st_kwriter_t *w, int16_t api_key, int16_t version, const void *msg)' % kind)
        o('{')
        o('    int i = api_check(api_key, version);')
        o('    return i < 0 ? ST_E_UNSUPPORTED : %s_ops[i].encode(w, version, msg);' % kind)
        o('}')
        o()
        o('int st_kp_%s_format(st_buf_t *b, int16_t api_key, int16_t version, const void *msg)' % kind)
        o('{')
        o('    int i = api_check(api_key, version);')
        o('    return i < 0 ? ST_E_UNSUPPORTED : %s_ops[i].format(b, version, msg);' % kind)
        o('}')
        o()
        o('int st_kp_%s_fill_any(st_kp_fill_t *f, int16_t api_key, int16_t version, void **out)' % kind)
        o('{')
        o('    int i = api_check(api_key, version);')
        o('    if (i < 0)')
        o('        return ST_E_UNSUPPORTED;')
        o('    void *m = st_arena_alloc(f->arena, st_kp_apis[i].%s);' % size)
        o('    if (!m)')
        o('        return -ENOMEM;')
        o('    *out = m;')
        o('    return %s_ops[i].fill(f, version, m);' % kind)
        o('}')
        o()
    o('bool st_kp_resp_throttle_first(int16_t api_key, int16_t version)')
    o('{')
    o('    switch (api_key) {')
    for a in sorted(apis, key=lambda a: a.key):
        first = []
        for v in a.versions():
            regular = [f for f in a.resp.regular() if vin(f.versions, v)]
            f = regular[0] if regular else None
            if f is not None and f.name == 'throttle_time_ms' and f.typ == 'int32' and not f.is_array:
                first.append(v)
        if not first:
            continue
        if first != list(range(first[0], first[-1] + 1)):
            raise SchemaError('%s: throttle_time_ms first in versions that are not one range' % a.name)
        o('    case %d: /* %s */' % (a.key, a.name))
        o('        return version >= %d && version <= %d;' % (first[0], first[-1]))
    o('    default:')
    o('        return false;')
    o('    }')
    o('}')
    o()
    return o.text()


def write_file(path, text):
    tmp = path + '.tmp'
    with open(tmp, 'w') as fh:
        fh.write(text)
    os.replace(tmp, path)


def main(argv):
    if len(argv) != 3:
        sys.stderr.write('usage: protogen.py SCHEMA OUTDIR\n')
        return 2
    try:
        apis = parse_schema(argv[1])
    except SchemaError as e:
        sys.stderr.write('protogen: %s\n' % e)
        return 1
    os.makedirs(argv[2], exist_ok=True)
    write_file(os.path.join(argv[2], 'kafka_gen.h'), gen_header(apis))
    write_file(os.path.join(argv[2], 'kafka_gen.c'), gen_source(apis))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
