"""protogen_mirror.py — the topic x partition plumbing protogen.py emits for `mirror` lines.

A `mirror` line (docs/protocol.md) says that an API's response answers its request topic for
topic and partition for partition (or, in its one-level form `mirror <names> -> <answers>.<key>`,
name for name: DescribeGroups, DeleteGroups; then only _skeleton is emitted). For such an API this module checks the line against the
parsed messages (Mirror) and emits, into kafka_gen.h and kafka_gen.c:

    st_kp_<api>_item_t                                     one request partition, flattened
    int32_t st_kp_<api>_flatten(arena, req, &items)        the request's partitions, flat
    int     st_kp_<api>_skeleton(arena, req, resp, items)  the response mirroring the request
    int32_t st_kp_<api>_mirror(arena, req, resp, &items)   both
    int     st_kp_<api>_req_build(arena, req, items, n)    a request from items (clients)

Errors in the line are ValueError; protogen.py reports them as schema errors.
"""

CTYPES = {'string': 'st_kstr_t', 'uuid': 'st_kuuid_t'}


class Mirror:
    """A `mirror` line: the request's topics x partitions and the response that answers them
    partition for partition.

        mirror <req topics>.<req partitions> -> <resp topics>.<resp partitions>
               topic=<field>[,<field>...] partition=<req field>[:<resp field>]

    topic= names the topic's identifying fields (string or uuid, the same name on both sides);
    partition= the partition's index field (int32), with its response name after a colon where
    it differs."""

    def __init__(self, api, toks, where):
        self.flat = None
        if len(toks) == 3 and toks[1] == '->':
            self.init_flat(api, toks, where)
            return
        m = None
        if len(toks) == 5 and toks[1] == '->' and toks[3].startswith('topic=') \
                and toks[4].startswith('partition='):
            m = (toks[0].split('.'), toks[2].split('.'))
        if not m or len(m[0]) != 2 or len(m[1]) != 2:
            raise ValueError('%s: mirror needs: a.b -> c.d topic=... partition=...' % where)
        self.api = api

        def array(struct, name, side):
            f = next((f for f in struct.fields if f.name == name), None)
            if f is None or not f.is_array or f.struct is None:
                raise ValueError('%s: mirror: %s has no struct array %r' % (where, side, name))
            return f
        self.req_topics = array(api.req, m[0][0], 'request')
        self.req_parts = array(self.req_topics.struct, m[0][1], 'request')
        self.resp_topics = array(api.resp, m[1][0], 'response')
        self.resp_parts = array(self.resp_topics.struct, m[1][1], 'response')

        def scalar(struct, name, types):
            f = next((f for f in struct.fields if f.name == name), None)
            if f is None or f.is_array or f.struct is not None or f.typ not in types:
                raise ValueError('%s: mirror: no %s field %r' % (where, '/'.join(types), name))
            return f
        self.topic_fields = []
        for name in toks[3][len('topic='):].split(','):
            q = scalar(self.req_topics.struct, name, ('string', 'uuid'))
            r = scalar(self.resp_topics.struct, name, (q.typ,))
            self.topic_fields.append((q, r))
        key = toks[4][len('partition='):].split(':')
        if len(key) > 2:
            raise ValueError('%s: mirror: partition=<req field>[:<resp field>]' % where)
        self.part_key = (scalar(self.req_parts.struct, key[0], ('int32',)),
                         scalar(self.resp_parts.struct, key[-1], ('int32',)))
        taken = {'topic_at', 'partition_at', 'req_topic', 'req_partition', 'resp_partition'}
        for f in [q for q, _ in self.topic_fields] + [self.part_key[0]]:
            if f.name in taken:
                raise ValueError('%s: mirror: field name %r is taken' % (where, f.name))
            taken.add(f.name)



    def init_flat(self, api, toks, where):
        """`mirror <req strings> -> <resp structs>.<key>`: one answer per name, in order."""
        out = toks[2].split('.')
        q = next((f for f in api.req.fields if f.name == toks[0]), None)
        if q is None or not q.is_array or q.typ != 'string':
            raise ValueError('%s: mirror: request has no string array %r' % (where, toks[0]))
        r = next((f for f in api.resp.fields if f.name == out[0]), None)
        if len(out) != 2 or r is None or not r.is_array or r.struct is None:
            raise ValueError('%s: mirror: response has no struct array %r' % (where, toks[2]))
        k = next((f for f in r.struct.fields if f.name == out[1]), None)
        if k is None or k.is_array or k.typ != 'string':
            raise ValueError('%s: mirror: no string field %r' % (where, out[1]))
        self.api = api
        self.flat = (q, r, k)


def gen_flat_header(o, a):
    q, r, k = a.mirror.flat
    o('/* %s: resp->%s mirroring req->%s, one for one and in order, each initialised with its' % (
        a.name, r.name, q.name))
    o(' * %s from the request. Arrays from arena; 0 or -ENOMEM. */' % k.name)
    o('int st_kp_%s_skeleton(st_arena_t *arena, const %s *req, %s *resp);' % (
        a.snake, a.req.ctype, a.resp.ctype))
    o()


def gen_flat_source(o, a):
    q, r, k = a.mirror.flat
    o('int st_kp_%s_skeleton(st_arena_t *arena, const %s *req, %s *resp)' % (
        a.snake, a.req.ctype, a.resp.ctype))
    o('{')
    o('    int32_t n = req->%s_count;' % q.name)
    o('    resp->%s = st_arena_zalloc(arena, (size_t)(n > 0 ? n : 0) * sizeof *resp->%s + 1);' % (
        r.name, r.name))
    o('    if (!resp->%s)' % r.name)
    o('        return -ENOMEM;')
    o('    resp->%s_count = n;' % r.name)
    o('    for (int32_t i = 0; i < n; i++) {')
    o('        st_kp_%s_init(&resp->%s[i]);' % (r.struct.prefix, r.name))
    o('        resp->%s[i].%s = req->%s[i];' % (r.name, k.name, q.name))
    o('    }')
    o('    return 0;')
    o('}')
    o()


def mirror_names(a):
    m = a.mirror
    P = a.snake
    return dict(P=P, item='st_kp_%s_item_t' % P, req=a.req.ctype, resp=a.resp.ctype,
                qt=m.req_topics.struct.ctype, qp=m.req_parts.struct.ctype,
                rt=m.resp_topics.struct.ctype, rp=m.resp_parts.struct.ctype,
                QT=m.req_topics.name, QP=m.req_parts.name, RT=m.resp_topics.name,
                RP=m.resp_parts.name, qkey=m.part_key[0].name, rkey=m.part_key[1].name)


def gen_header(o, a):
    if a.mirror.flat:
        gen_flat_header(o, a)
        return
    m = a.mirror
    n = mirror_names(a)
    o('/* %s, topic x partition: the request\'s %s x %s flattened into items, one per' % (
        a.name, n['QT'], n['QP']))
    o(' * partition in request order, and the response\'s %s x %s built to mirror them. */' % (
        n['RT'], n['RP']))
    o('typedef struct st_kp_%s_item {' % n['P'])
    for q, _ in m.topic_fields:
        o('    %s %s; /* the topic\'s, as the request gave it */' % (CTYPES[q.typ], q.name))
    o('    int32_t %s; /* the partition\'s */' % n['qkey'])
    o('    int32_t topic_at;     /* index in req->%s */' % n['QT'])
    o('    int32_t partition_at; /* index in that topic\'s %s */' % n['QP'])
    o('    %s *req_topic;' % n['qt'])
    o('    %s *req_partition;' % n['qp'])
    o('    %s *resp_partition; /* its answer (NULL until _skeleton) */' % n['rp'])
    o('} %s;' % n['item'])
    o()
    o('/* The items of req, from arena (never NULL, even for none): their count, or -ENOMEM. */')
    o('int32_t st_kp_%s_flatten(st_arena_t *arena, %s *req, %s **items);' % (
        n['P'], n['req'], n['item']))
    o('/* Sets resp->%s to mirror req: each topic initialised with the request\'s %s, each' % (
        n['RT'], '/'.join(q.name for q, _ in m.topic_fields)))
    o(' * partition initialised with its %s; items (from _flatten, or NULL) get their' % n['rkey'])
    o(' * resp_partition. Arrays from arena; 0 or -ENOMEM. */')
    o('int st_kp_%s_skeleton(st_arena_t *arena, const %s *req, %s *resp, %s *items);' % (
        n['P'], n['req'], n['resp'], n['item']))
    o('/* _flatten, then _skeleton: the count of items, or -ENOMEM. */')
    o('int32_t st_kp_%s_mirror(st_arena_t *arena, %s *req, %s *resp, %s **items);' % (
        n['P'], n['req'], n['resp'], n['item']))
    o('/* The other way (a client building a request): req->%s from the n items\' topic and' % n['QT'])
    o(' * partition fields, each run of consecutive items with the same topic fields one topic;')
    o(' * every topic and partition initialised, each item given its topic_at, partition_at,')
    o(' * req_topic and req_partition for the caller to fill in. Arrays from arena; 0 or -ENOMEM. */')
    o('int st_kp_%s_req_build(st_arena_t *arena, %s *req, %s *items, int32_t n);' % (
        n['P'], n['req'], n['item']))
    o()


def gen_source(o, a):
    if a.mirror.flat:
        gen_flat_source(o, a)
        return
    m = a.mirror
    n = mirror_names(a)
    P = n['P']
    o('int32_t st_kp_%s_flatten(st_arena_t *arena, %s *req, %s **items)' % (P, n['req'], n['item']))
    o('{')
    o('    int64_t total = 0;')
    o('    for (int32_t t = 0; t < req->%s_count; t++)' % n['QT'])
    o('        if (req->%s[t].%s_count > 0)' % (n['QT'], n['QP']))
    o('            total += req->%s[t].%s_count;' % (n['QT'], n['QP']))
    o('    if (total > INT32_MAX)')
    o('        return -ENOMEM;')
    o('    %s *it = st_arena_zalloc(arena, (size_t)total * sizeof *it + 1);' % n['item'])
    o('    if (!it)')
    o('        return -ENOMEM;')
    o('    int32_t k = 0;')
    o('    for (int32_t t = 0; t < req->%s_count; t++) {' % n['QT'])
    o('        %s *qt = &req->%s[t];' % (n['qt'], n['QT']))
    o('        for (int32_t p = 0; p < qt->%s_count; p++, k++) {' % n['QP'])
    for q, _ in m.topic_fields:
        o('            it[k].%s = qt->%s;' % (q.name, q.name))
    o('            it[k].%s = qt->%s[p].%s;' % (n['qkey'], n['QP'], n['qkey']))
    o('            it[k].topic_at = t;')
    o('            it[k].partition_at = p;')
    o('            it[k].req_topic = qt;')
    o('            it[k].req_partition = &qt->%s[p];' % n['QP'])
    o('        }')
    o('    }')
    o('    *items = it;')
    o('    return k;')
    o('}')
    o()
    o('int st_kp_%s_skeleton(st_arena_t *arena, const %s *req, %s *resp, %s *items)' % (
        P, n['req'], n['resp'], n['item']))
    o('{')
    o('    int32_t nt = req->%s_count;' % n['QT'])
    o('    resp->%s = st_arena_zalloc(arena, (size_t)(nt > 0 ? nt : 0) * sizeof *resp->%s + 1);' % (
        n['RT'], n['RT']))
    o('    if (!resp->%s)' % n['RT'])
    o('        return -ENOMEM;')
    o('    resp->%s_count = nt;' % n['RT'])
    o('    int32_t k = 0;')
    o('    for (int32_t t = 0; t < nt; t++) {')
    o('        const %s *qt = &req->%s[t];' % (n['qt'], n['QT']))
    o('        %s *rt = &resp->%s[t];' % (n['rt'], n['RT']))
    o('        st_kp_%s_init(rt);' % m.resp_topics.struct.prefix)
    for q, r in m.topic_fields:
        o('        rt->%s = qt->%s;' % (r.name, q.name))
    o('        int32_t np = qt->%s_count;' % n['QP'])
    o('        rt->%s = st_arena_zalloc(arena, (size_t)(np > 0 ? np : 0) * sizeof *rt->%s + 1);' % (
        n['RP'], n['RP']))
    o('        if (!rt->%s)' % n['RP'])
    o('            return -ENOMEM;')
    o('        rt->%s_count = np;' % n['RP'])
    o('        for (int32_t p = 0; p < np; p++, k++) {')
    o('            st_kp_%s_init(&rt->%s[p]);' % (m.resp_parts.struct.prefix, n['RP']))
    o('            rt->%s[p].%s = qt->%s[p].%s;' % (n['RP'], n['rkey'], n['QP'], n['qkey']))
    o('            if (items)')
    o('                items[k].resp_partition = &rt->%s[p];' % n['RP'])
    o('        }')
    o('    }')
    o('    return 0;')
    o('}')
    o()
    o('int32_t st_kp_%s_mirror(st_arena_t *arena, %s *req, %s *resp, %s **items)' % (
        P, n['req'], n['resp'], n['item']))
    o('{')
    o('    int32_t k = st_kp_%s_flatten(arena, req, items);' % P)
    o('    if (k < 0)')
    o('        return k;')
    o('    int rc = st_kp_%s_skeleton(arena, req, resp, *items);' % P)
    o('    return rc < 0 ? rc : k;')
    o('}')
    o()
    o('/* Whether items a and b name the same topic. */')
    o('static bool %s_same_topic(const %s *a, const %s *b)' % (P, n['item'], n['item']))
    o('{')
    conds = []
    for q, _ in m.topic_fields:
        if q.typ == 'uuid':
            conds.append('memcmp(a->%s.b, b->%s.b, sizeof a->%s.b) == 0' % (q.name, q.name, q.name))
        else:
            conds.append('a->%s.len == b->%s.len &&\n           (a->%s.len <= 0 || '
                         'memcmp(a->%s.ptr, b->%s.ptr, (size_t)a->%s.len) == 0)' % ((q.name,) * 6))
    o('    return %s;' % ' &&\n           '.join(conds))
    o('}')
    o()
    o('int st_kp_%s_req_build(st_arena_t *arena, %s *req, %s *items, int32_t n)' % (
        P, n['req'], n['item']))
    o('{')
    o('    int32_t nt = 0;')
    o('    for (int32_t k = 0; k < n; k++)')
    o('        if (k == 0 || !%s_same_topic(&items[k], &items[k - 1]))' % P)
    o('            nt++;')
    o('    %s *topics = st_arena_zalloc(arena, (size_t)nt * sizeof *topics + 1);' % n['qt'])
    o('    %s *parts = st_arena_zalloc(arena, (size_t)(n > 0 ? n : 0) * sizeof *parts + 1);' % n['qp'])
    o('    if (!topics || !parts)')
    o('        return -ENOMEM;')
    o('    int32_t t = -1;')
    o('    for (int32_t k = 0; k < n; k++) {')
    o('        if (k == 0 || !%s_same_topic(&items[k], &items[k - 1])) {' % P)
    o('            t++;')
    o('            st_kp_%s_init(&topics[t]);' % m.req_topics.struct.prefix)
    for q, _ in m.topic_fields:
        o('            topics[t].%s = items[k].%s;' % (q.name, q.name))
    o('            topics[t].%s = &parts[k];' % n['QP'])
    o('        }')
    o('        st_kp_%s_init(&parts[k]);' % m.req_parts.struct.prefix)
    o('        parts[k].%s = items[k].%s;' % (n['qkey'], n['qkey']))
    o('        items[k].topic_at = t;')
    o('        items[k].partition_at = topics[t].%s_count++;' % n['QP'])
    o('        items[k].req_topic = &topics[t];')
    o('        items[k].req_partition = &parts[k];')
    o('    }')
    o('    req->%s = topics;' % n['QT'])
    o('    req->%s_count = nt;' % n['QT'])
    o('    return 0;')
    o('}')
    o()

