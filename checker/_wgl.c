/* The linearizability search's hot loop, compiled: checker/entry_search.py's loop over
 * flat int arrays, for models whose every operation has at most one next state (register,
 * kv). checker/compiled_search.py builds the arrays and is the only caller; its docstring
 * is the contract. In short:
 *
 * - Operations are indexed 0..n-1; kind[i] is READ (next state: the state itself, only
 *   when it equals a[i]), SET (a[i]), CAS (b[i], only when the state equals a[i]) or
 *   TRANSFORM (transform(a[i], state), asked of a Python callable once per pair and
 *   cached). States and arguments are interned value ids (>= 0).
 * - The search is entry_search's exactly: call and return entries in one doubly linked
 *   list, candidates in list order, the memo keyed by (Zobrist hash of the ok operations
 *   placed, state) holding the bitsets of info operations placed (a configuration is
 *   pruned when one of them is a subset of its own), an info operation that leaves the
 *   state unchanged is not placed, and the deepest configuration is kept for the report.
 * - Search.run(limit) goes on until `steps` reaches `limit` (checked before each entry,
 *   as entry_search yields) or the search ends; it returns 0 (paused), 1 (every ok
 *   operation placed) or 2 (refuted).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* CPython 3.11's layout of an instance's attribute values (see op_attr below): only the
 * structure of a class's shared attribute keys is taken from its internal header. */
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000 && defined(__has_include)
#if __has_include("internal/pycore_dict.h")
#define Py_BUILD_CORE 1
#include "internal/pycore_dict.h"
#undef Py_BUILD_CORE
#define WGL_INLINE_VALUES 1
#endif
#endif

enum { K_READ = 0, K_SET = 1, K_CAS = 2, K_TRANSFORM = 3 };
enum { RUNNING = 0, LINEARIZED = 1, REFUTED = 2 };

typedef struct {
    PyObject_HEAD
    Py_ssize_t n;
    int32_t *kind, *a, *b;
    uint8_t *is_ok, *returns;
    uint64_t *z0, *z1;
    int32_t *info_bit; /* the info operation's bit, -1 for an ok operation */
    Py_ssize_t words;  /* 64-bit words per info bitset */
    int32_t *nxt, *prv; /* 2n+1 nodes (2i: call of op i, 2i+1: its return, 2n: head) */
    int32_t head;
    Py_ssize_t must_place, placed_returns;
    int32_t *st_op, *st_state; /* the stack: op placed, state before it */
    Py_ssize_t depth;
    int32_t state;
    uint64_t cz0, cz1;
    uint64_t *bits, *scratch;
    int32_t entry;
    int32_t *deep_path;
    Py_ssize_t deep_len, best_depth;
    int32_t deep_state, deep_before;
    int best_pending;
    long long steps;
    int status;
    /* the memo: open addressing over (z0, z1, state) -> first record */
    uint64_t *m_z0, *m_z1;
    int32_t *m_state, *m_head;
    size_t m_cap, m_used;
    int32_t *r_next; /* records: next record, and `words` words of bits each */
    uint64_t *r_bits;
    size_t r_cap, r_used;
    /* the TRANSFORM cache: (a, state) -> next state */
    int32_t *t_a, *t_s, *t_out;
    size_t t_cap, t_used;
    PyObject *transform;
    size_t first_cap; /* the memo's first size: 64-1024 slots, by the partition's size */
    size_t t_first;   /* the TRANSFORM cache's: 16-1024, by its TRANSFORM operations */
    long long *op_id; /* the fused pass's operation ids (NULL: read them from the ops) */
} Search;

static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static inline size_t mix3(uint64_t a, uint64_t b, uint64_t c) {
    uint64_t h = a ^ (b * 0x9E3779B97F4A7C15ULL) ^ (c * 0xC2B2AE3D27D4EB4FULL);
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 32;
    return (size_t)h;
}

/* -- the memo ----------------------------------------------------------------------- */

/* Grows an open-addressing table (doubling; `first` slots when empty) whose slots are
 * spread over `ncols` parallel arrays: *cols[c] has elements of sizes[c] bytes, and column
 * `marker` is int32 with -1 in the empty slots. `hash(cols, k)` is slot k's hash. The
 * memo and the TRANSFORM cache are both such tables. 0, or -1 with MemoryError set. */
typedef size_t (*slot_hash)(void **const *cols, size_t k);

static int table_grow(void **const *cols, const size_t *sizes, int ncols, int marker,
                      size_t *cap_io, size_t first, slot_hash hash) {
    enum { MAX_COLS = 4 };
    size_t old = *cap_io, cap = old ? old * 2 : first;
    void *fresh[MAX_COLS] = {NULL};
    for (int c = 0; c < ncols; c++) {
        fresh[c] = PyMem_Calloc(cap, sizes[c]);
        if (!fresh[c]) {
            for (int d = 0; d < c; d++)
                PyMem_Free(fresh[d]);
            PyErr_NoMemory();
            return -1;
        }
    }
    memset(fresh[marker], 0xff, cap * sizeof(int32_t));
    const int32_t *was = *cols[marker];
    int32_t *now = fresh[marker];
    for (size_t k = 0; k < old; k++) {
        if (was[k] < 0)
            continue;
        size_t h = hash(cols, k) & (cap - 1);
        while (now[h] >= 0)
            h = (h + 1) & (cap - 1);
        for (int c = 0; c < ncols; c++)
            memcpy((char *)fresh[c] + h * sizes[c], (char *)*cols[c] + k * sizes[c], sizes[c]);
    }
    for (int c = 0; c < ncols; c++) {
        PyMem_Free(*cols[c]);
        *cols[c] = fresh[c];
    }
    *cap_io = cap;
    return 0;
}

static size_t memo_slot_hash(void **const *cols, size_t k) {
    return mix3(((uint64_t *)*cols[0])[k], ((uint64_t *)*cols[1])[k],
                (uint64_t)((int32_t *)*cols[2])[k]);
}

static int memo_grow(Search *S) {
    void **cols[] = {(void **)&S->m_z0, (void **)&S->m_z1, (void **)&S->m_state,
                     (void **)&S->m_head};
    static const size_t sizes[] = {sizeof(uint64_t), sizeof(uint64_t), sizeof(int32_t),
                                   sizeof(int32_t)};
    return table_grow(cols, sizes, 4, 3, &S->m_cap, S->first_cap, memo_slot_hash);
}

static int32_t record_new(Search *S, int32_t next, const uint64_t *bits) {
    if (S->r_used == S->r_cap) {
        size_t cap = S->r_cap ? S->r_cap * 2 : S->first_cap;
        int32_t *rn = PyMem_Realloc(S->r_next, cap * sizeof(int32_t));
        if (!rn) {
            PyErr_NoMemory();
            return -1;
        }
        S->r_next = rn;
        if (S->words) {
            uint64_t *rb = PyMem_Realloc(S->r_bits, cap * S->words * sizeof(uint64_t));
            if (!rb) {
                PyErr_NoMemory();
                return -1;
            }
            S->r_bits = rb;
        }
        S->r_cap = cap;
    }
    int32_t r = (int32_t)S->r_used++;
    S->r_next[r] = next;
    if (S->words)
        memcpy(S->r_bits + (size_t)r * S->words, bits, S->words * sizeof(uint64_t));
    return r;
}

/* 1: the configuration is new (recorded), 0: pruned, -1: error. */
static int memo_visit(Search *S, uint64_t z0, uint64_t z1, int32_t state, const uint64_t *bits) {
    if ((S->m_used + 1) * 2 > S->m_cap && memo_grow(S) < 0)
        return -1;
    size_t mask = S->m_cap - 1;
    size_t h = mix3(z0, z1, (uint64_t)state) & mask;
    while (S->m_head[h] >= 0) {
        if (S->m_z0[h] == z0 && S->m_z1[h] == z1 && S->m_state[h] == state) {
            Py_ssize_t w = S->words;
            for (int32_t r = S->m_head[h]; r >= 0; r = S->r_next[r]) {
                const uint64_t *earlier = S->r_bits + (size_t)r * w;
                Py_ssize_t k = 0;
                while (k < w && (earlier[k] & bits[k]) == earlier[k])
                    k++;
                if (k == w)
                    return 0; /* an earlier search had a subset of these placed */
            }
            int32_t r = record_new(S, S->m_head[h], bits);
            if (r < 0)
                return -1;
            S->m_head[h] = r;
            return 1;
        }
        h = (h + 1) & mask;
    }
    int32_t r = record_new(S, -1, bits);
    if (r < 0)
        return -1;
    S->m_z0[h] = z0;
    S->m_z1[h] = z1;
    S->m_state[h] = state;
    S->m_head[h] = r;
    S->m_used++;
    return 1;
}

/* -- the model ---------------------------------------------------------------------- */

static size_t transform_slot_hash(void **const *cols, size_t k) {
    return mix3((uint64_t)((int32_t *)*cols[0])[k], (uint64_t)((int32_t *)*cols[1])[k], 0);
}

static int transform_grow(Search *S) {
    void **cols[] = {(void **)&S->t_a, (void **)&S->t_s, (void **)&S->t_out};
    static const size_t sizes[] = {sizeof(int32_t), sizeof(int32_t), sizeof(int32_t)};
    return table_grow(cols, sizes, 3, 0, &S->t_cap, S->t_first, transform_slot_hash);
}

/* The id of `value` in `ids` (appending it to `values` when new): >= 0, -1 on error, -2
 * when it cannot be interned (unhashable or not equal to itself: NaN). */
static long intern_value(PyObject *ids, PyObject *values, PyObject *value);

/* Appender(values, ids, fallback): the kv model's TRANSFORM, append, in C: the id of
 * (values[state] or "") + values[arg], interned in `ids`/`values` as the Python path
 * interns it. Any value not an exact str (or None for the state) goes to
 * `fallback(arg, state)`, the Python transform. The Search calls it directly. */
typedef struct {
    PyObject_HEAD
    PyObject *values, *ids, *fallback;
} Appender;

static void Appender_dealloc(Appender *A) {
    Py_XDECREF(A->values);
    Py_XDECREF(A->ids);
    Py_XDECREF(A->fallback);
    Py_TYPE(A)->tp_free((PyObject *)A);
}

static int Appender_init(Appender *A, PyObject *args, PyObject *kwds) {
    PyObject *values, *ids, *fallback;
    if (!PyArg_ParseTuple(args, "O!O!O", &PyList_Type, &values, &PyDict_Type, &ids, &fallback))
        return -1;
    Py_INCREF(values);
    Py_INCREF(ids);
    Py_INCREF(fallback);
    Py_XSETREF(A->values, values);
    Py_XSETREF(A->ids, ids);
    Py_XSETREF(A->fallback, fallback);
    return 0;
}

/* The next state's id, or -1 with an exception set. */
static long appender_apply(Appender *A, long arg, long state) {
    Py_ssize_t n = PyList_GET_SIZE(A->values);
    if (arg >= 0 && arg < n && state >= 0 && state < n) {
        PyObject *tail = PyList_GET_ITEM(A->values, arg);
        PyObject *head = PyList_GET_ITEM(A->values, state);
        if (PyUnicode_CheckExact(tail) && (head == Py_None || PyUnicode_CheckExact(head))) {
            PyObject *joined = head == Py_None ? Py_NewRef(tail) : PyUnicode_Concat(head, tail);
            if (!joined)
                return -1;
            long id = intern_value(A->ids, A->values, joined); /* an exact str: >= 0 or -1 */
            Py_DECREF(joined);
            return id;
        }
    }
    if (A->fallback == Py_None) { /* the fused pass's: its values are all str or None */
        PyErr_SetString(PyExc_ValueError, "Appender: a value that is not a str, and no fallback");
        return -1;
    }
    PyObject *out = PyObject_CallFunction(A->fallback, "ll", arg, state);
    if (!out)
        return -1;
    long id = PyLong_AsLong(out);
    Py_DECREF(out);
    return id;
}

static PyObject *Appender_call(Appender *A, PyObject *args, PyObject *kwds) {
    long arg, state;
    if (!PyArg_ParseTuple(args, "ll", &arg, &state))
        return NULL;
    long id = appender_apply(A, arg, state);
    if (id == -1 && PyErr_Occurred())
        return NULL;
    return PyLong_FromLong(id);
}

static PyTypeObject AppenderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "etcdspec.checker._wgl.Appender",
    .tp_basicsize = sizeof(Appender),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The kv model's append as a Search transform, in C.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Appender_init,
    .tp_dealloc = (destructor)Appender_dealloc,
    .tp_call = (ternaryfunc)Appender_call,
};

/* The next state of op i from `state`: an id, -1 for none, -2 on error. */
static int32_t next_state(Search *S, Py_ssize_t i, int32_t state) {
    switch (S->kind[i]) {
    case K_READ:
        return state == S->a[i] ? state : -1;
    case K_SET:
        return S->a[i];
    case K_CAS:
        return state == S->a[i] ? S->b[i] : -1;
    default:
        break;
    }
    int32_t arg = S->a[i];
    if ((S->t_used + 1) * 2 > S->t_cap && transform_grow(S) < 0)
        return -2;
    size_t mask = S->t_cap - 1;
    size_t h = mix3((uint64_t)arg, (uint64_t)state, 0) & mask;
    while (S->t_a[h] >= 0) {
        if (S->t_a[h] == arg && S->t_s[h] == state)
            return S->t_out[h];
        h = (h + 1) & mask;
    }
    if (S->transform == NULL || S->transform == Py_None) {
        PyErr_SetString(PyExc_ValueError, "a TRANSFORM operation needs a transform callable");
        return -2;
    }
    long value;
    if (Py_IS_TYPE(S->transform, &AppenderType)) {
        value = appender_apply((Appender *)S->transform, (long)arg, (long)state);
    } else {
        PyObject *out = PyObject_CallFunction(S->transform, "ii", (int)arg, (int)state);
        if (out == NULL)
            return -2;
        value = PyLong_AsLong(out);
        Py_DECREF(out);
    }
    if (value == -1 && PyErr_Occurred())
        return -2;
    if (value < 0 || value > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "transform must return a state id >= 0");
        return -2;
    }
    S->t_a[h] = arg;
    S->t_s[h] = state;
    S->t_out[h] = (int32_t)value;
    S->t_used++;
    return (int32_t)value;
}

/* -- the list ----------------------------------------------------------------------- */

static inline void lift(Search *S, int32_t node) {
    int32_t a = S->prv[node], b = S->nxt[node];
    S->nxt[a] = b;
    if (b >= 0)
        S->prv[b] = a;
}

static inline void unlift(Search *S, int32_t node) {
    S->nxt[S->prv[node]] = node;
    if (S->nxt[node] >= 0)
        S->prv[S->nxt[node]] = node;
}

typedef struct {
    long long pos;
    int typ; /* a return (0) before a call (1) at the same position */
    int32_t node;
} EntryKey;

static int entry_cmp(const void *x, const void *y) {
    const EntryKey *p = x, *q = y;
    if (p->pos != q->pos)
        return p->pos < q->pos ? -1 : 1;
    if (p->typ != q->typ)
        return p->typ < q->typ ? -1 : 1;
    return p->node < q->node ? -1 : (p->node > q->node);
}

/* The entries in list order. A partition's calls come in history order and most of its
 * returns soon after their calls, so the keys are nearly sorted: an insertion sort is
 * linear there (qsort's comparisons through a pointer were most of a 100-operation
 * partition's set-up). Past 8 moves per key on average (many concurrent operations) the
 * rest goes to qsort; the order is the same either way (entry_cmp is a total order). */
static void sort_entries(EntryKey *keys, Py_ssize_t n) {
    Py_ssize_t budget = 8 * n + 64;
    for (Py_ssize_t k = 1; k < n; k++) {
        EntryKey key = keys[k];
        Py_ssize_t j = k;
        while (j > 0 && entry_cmp(&key, &keys[j - 1]) < 0) {
            keys[j] = keys[j - 1];
            j--;
        }
        keys[j] = key;
        budget -= k - j;
        if (budget < 0) {
            qsort(keys, (size_t)n, sizeof(EntryKey), entry_cmp);
            return;
        }
    }
}

/* -- the search --------------------------------------------------------------------- */

static void record_deepest(Search *S) {
    memcpy(S->deep_path, S->st_op, S->depth * sizeof(int32_t));
    S->deep_len = S->depth;
    S->deep_state = S->state;
    S->deep_before = S->depth ? S->st_state[S->depth - 1] : -1;
}

static PyObject *Search_run(Search *S, PyObject *arg) {
    long long limit = PyLong_AsLongLong(arg);
    if (limit == -1 && PyErr_Occurred())
        return NULL;
    if (S->status != RUNNING)
        return PyLong_FromLong(S->status);
    int32_t *nxt = S->nxt, *prv = S->prv;
    (void)prv;
    Py_ssize_t words = S->words;
    int32_t entry = S->entry;
    for (;;) {
        if (S->steps >= limit) {
            S->entry = entry;
            return PyLong_FromLong(RUNNING);
        }
        if (entry >= 0 && !(entry & 1)) { /* a call entry: try placing its operation */
            Py_ssize_t i = entry >> 1;
            S->steps++;
            int32_t next = next_state(S, i, S->state);
            if (next == -2) {
                S->entry = entry;
                S->steps--;
                return NULL;
            }
            if (next < 0) {
                entry = nxt[entry];
                continue;
            }
            int ok = S->is_ok[i];
            uint64_t zi0 = S->cz0, zi1 = S->cz1;
            uint64_t *bi = S->bits;
            if (ok) {
                zi0 ^= S->z0[i];
                zi1 ^= S->z1[i];
            } else {
                if (next == S->state) {
                    entry = nxt[entry];
                    continue;
                }
                memcpy(S->scratch, S->bits, words * sizeof(uint64_t));
                int32_t bit = S->info_bit[i];
                S->scratch[bit >> 6] |= (uint64_t)1 << (bit & 63);
                bi = S->scratch;
            }
            int fresh = memo_visit(S, zi0, zi1, next, bi);
            if (fresh < 0) {
                S->entry = entry;
                return NULL;
            }
            if (!fresh) {
                entry = nxt[entry];
                continue;
            }
            lift(S, entry);
            if (S->returns[i]) {
                lift(S, entry + 1);
                S->placed_returns++;
            }
            S->st_op[S->depth] = (int32_t)i;
            S->st_state[S->depth] = S->state;
            S->depth++;
            S->state = next;
            S->cz0 = zi0;
            S->cz1 = zi1;
            if (!ok) {
                int32_t bit = S->info_bit[i];
                S->bits[bit >> 6] |= (uint64_t)1 << (bit & 63);
            }
            if (S->depth > S->best_depth)
                S->best_pending = 1;
            if (S->placed_returns == S->must_place) {
                S->status = LINEARIZED;
                S->entry = -1;
                return PyLong_FromLong(LINEARIZED);
            }
            entry = nxt[S->head];
            continue;
        }
        /* A return entry (or the list's end): no candidate left here. */
        if (S->best_pending && S->depth >= S->best_depth) {
            record_deepest(S);
            S->best_depth = S->depth;
            S->best_pending = 0;
        }
        if (S->depth == 0) {
            S->status = REFUTED;
            S->entry = -1;
            return PyLong_FromLong(REFUTED);
        }
        S->depth--;
        Py_ssize_t i = S->st_op[S->depth];
        S->state = S->st_state[S->depth];
        if (S->is_ok[i]) {
            S->cz0 ^= S->z0[i];
            S->cz1 ^= S->z1[i];
        } else {
            int32_t bit = S->info_bit[i];
            S->bits[bit >> 6] &= ~((uint64_t)1 << (bit & 63));
        }
        int32_t node = (int32_t)(2 * i);
        if (S->returns[i]) {
            unlift(S, node + 1);
            S->placed_returns--;
        }
        unlift(S, node);
        entry = nxt[node];
    }
}

static int read_ints(PyObject *seq, Py_ssize_t n, const char *what, int32_t *out) {
    PyObject *fast = PySequence_Fast(seq, what);
    if (!fast)
        return -1;
    if (PySequence_Fast_GET_SIZE(fast) != n) {
        PyErr_Format(PyExc_ValueError, "%s: %zd items, expected %zd", what,
                     PySequence_Fast_GET_SIZE(fast), n);
        Py_DECREF(fast);
        return -1;
    }
    PyObject **items = PySequence_Fast_ITEMS(fast);
    for (Py_ssize_t k = 0; k < n; k++) {
        long v = PyLong_AsLong(items[k]);
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
        if (v < INT32_MIN || v > INT32_MAX) {
            PyErr_Format(PyExc_OverflowError, "%s[%zd] = %ld does not fit 32 bits", what, k, v);
            Py_DECREF(fast);
            return -1;
        }
        out[k] = (int32_t)v;
    }
    Py_DECREF(fast);
    return 0;
}

static int read_positions(PyObject *seq, Py_ssize_t n, const char *what, long long *out) {
    PyObject *fast = PySequence_Fast(seq, what);
    if (!fast)
        return -1;
    if (PySequence_Fast_GET_SIZE(fast) != n) {
        PyErr_Format(PyExc_ValueError, "%s: %zd items, expected %zd", what,
                     PySequence_Fast_GET_SIZE(fast), n);
        Py_DECREF(fast);
        return -1;
    }
    PyObject **items = PySequence_Fast_ITEMS(fast);
    for (Py_ssize_t k = 0; k < n; k++) {
        if (items[k] == Py_None) {
            out[k] = -1;
            continue;
        }
        long long v = PyLong_AsLongLong(items[k]);
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
        out[k] = v;
    }
    Py_DECREF(fast);
    return 0;
}

static void Search_dealloc(Search *S) {
    void *blocks[] = {S->kind,   S->a,       S->b,      S->is_ok,  S->returns, S->z0,
                      S->z1,     S->info_bit, S->nxt,   S->prv,    S->st_op,   S->st_state,
                      S->bits,   S->scratch, S->deep_path, S->m_z0, S->m_z1,   S->m_state,
                      S->m_head, S->r_next,  S->r_bits, S->t_a,    S->t_s,     S->t_out,
                      S->op_id};
    for (size_t k = 0; k < sizeof(blocks) / sizeof(blocks[0]); k++)
        PyMem_Free(blocks[k]);
    Py_XDECREF(S->transform);
    Py_TYPE(S)->tp_free((PyObject *)S);
}

/* Fills a fresh Search from C arrays of n operations (kinds 0-3, a/b state ids, ok
 * flags, call positions >= 0, return positions or -1 for none). 0, or -1 with an error. */
static int search_setup(Search *S, Py_ssize_t n, const uint8_t *kb, const int32_t *a,
                        const int32_t *b, const uint8_t *ob, const long long *call_pos,
                        const long long *ret_pos, int init, uint64_t seed,
                        PyObject *transform) {
    int rc = -1;
    EntryKey *keys = NULL;
    if (S->kind != NULL) {
        PyErr_SetString(PyExc_TypeError, "Search is initialised once");
        return -1;
    }
    if (n >= INT32_MAX / 2 - 1) {
        PyErr_SetString(PyExc_OverflowError, "too many operations for one partition");
        return -1;
    }
    S->n = n;
    size_t m = (size_t)n + 1;
    /* A small partition's tables stay small, with room for a configuration per operation
     * (most searches place each about once) at half load: no 24 KB to clear each. */
    S->first_cap = 64;
    while (S->first_cap < 1024 && S->first_cap < 2 * m)
        S->first_cap *= 2;
    size_t transforms = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        transforms += kb[i] == K_TRANSFORM;
    S->t_first = 16;
    while (S->t_first < 1024 && S->t_first < 4 * transforms)
        S->t_first *= 2;
    S->kind = PyMem_Calloc(m, sizeof(int32_t));
    S->a = PyMem_Calloc(m, sizeof(int32_t));
    S->b = PyMem_Calloc(m, sizeof(int32_t));
    S->is_ok = PyMem_Calloc(m, 1);
    S->returns = PyMem_Calloc(m, 1);
    S->z0 = PyMem_Calloc(m, sizeof(uint64_t));
    S->z1 = PyMem_Calloc(m, sizeof(uint64_t));
    S->info_bit = PyMem_Calloc(m, sizeof(int32_t));
    S->nxt = PyMem_Calloc(2 * m, sizeof(int32_t));
    S->prv = PyMem_Calloc(2 * m, sizeof(int32_t));
    S->st_op = PyMem_Calloc(m, sizeof(int32_t));
    S->st_state = PyMem_Calloc(m, sizeof(int32_t));
    S->deep_path = PyMem_Calloc(m, sizeof(int32_t));
    keys = PyMem_Calloc(2 * m, sizeof(EntryKey));
    if (!S->kind || !S->a || !S->b || !S->is_ok || !S->returns || !S->z0 || !S->z1 ||
        !S->info_bit || !S->nxt || !S->prv || !S->st_op || !S->st_state || !S->deep_path ||
        !keys) {
        PyErr_NoMemory();
        goto done;
    }
    if (n) {
        memcpy(S->a, a, (size_t)n * sizeof(int32_t));
        memcpy(S->b, b, (size_t)n * sizeof(int32_t));
    }
    Py_ssize_t infos = 0, nkeys = 0;
    uint64_t rng = seed;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (kb[i] > K_TRANSFORM) {
            PyErr_Format(PyExc_ValueError, "kinds[%zd] = %d is not 0-3", i, (int)kb[i]);
            goto done;
        }
        S->kind[i] = kb[i];
        S->is_ok[i] = ob[i] ? 1 : 0;
        S->returns[i] = ret_pos[i] >= 0;
        S->info_bit[i] = S->is_ok[i] ? -1 : (int32_t)infos++;
        S->z0[i] = splitmix(&rng);
        S->z1[i] = splitmix(&rng);
        if (call_pos[i] < 0) {
            PyErr_Format(PyExc_ValueError, "calls[%zd] is missing", i);
            goto done;
        }
        keys[nkeys++] = (EntryKey){call_pos[i], 1, (int32_t)(2 * i)};
        if (S->returns[i]) {
            keys[nkeys++] = (EntryKey){ret_pos[i], 0, (int32_t)(2 * i + 1)};
            S->must_place++;
        }
    }
    sort_entries(keys, nkeys);
    S->head = (int32_t)(2 * n);
    for (Py_ssize_t k = 0; k < 2 * n + 1; k++)
        S->nxt[k] = S->prv[k] = -1;
    int32_t last = S->head;
    for (Py_ssize_t k = 0; k < nkeys; k++) {
        S->nxt[last] = keys[k].node;
        S->prv[keys[k].node] = last;
        last = keys[k].node;
    }
    S->words = (infos + 63) / 64;
    S->bits = PyMem_Calloc((size_t)S->words + 1, sizeof(uint64_t));
    S->scratch = PyMem_Calloc((size_t)S->words + 1, sizeof(uint64_t));
    if (!S->bits || !S->scratch) {
        PyErr_NoMemory();
        goto done;
    }
    S->state = init;
    S->deep_state = init;
    S->deep_before = -1;
    S->best_depth = -1;
    S->best_pending = 1;
    S->entry = S->nxt[S->head];
    S->status = S->must_place == 0 ? LINEARIZED : RUNNING;
    Py_XINCREF(transform);
    S->transform = transform;
    rc = 0;
done:
    PyMem_Free(keys);
    return rc;
}

/* Search(kinds: bytes, a: list[int], b: list[int], is_ok: bytes, calls: list[int],
 *        rets: list[int | None], init: int, seed: int, transform: callable | None) */
static int Search_init(Search *S, PyObject *args, PyObject *kwds) {
    static char *names[] = {"kinds", "a", "b", "is_ok", "calls", "rets", "init", "seed",
                            "transform", NULL};
    Py_buffer kinds, is_ok;
    PyObject *a, *b, *calls, *rets, *transform;
    int init;
    unsigned long long seed;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "y*OOy*OOiKO", names, &kinds, &a, &b, &is_ok,
                                     &calls, &rets, &init, &seed, &transform))
        return -1;
    int rc = -1;
    long long *call_pos = NULL, *ret_pos = NULL;
    int32_t *av = NULL, *bv = NULL;
    Py_ssize_t n = kinds.len;
    if (is_ok.len != n) {
        PyErr_SetString(PyExc_ValueError, "kinds and is_ok differ in length");
        goto done;
    }
    size_t m = (size_t)n + 1;
    call_pos = PyMem_Calloc(m, sizeof(long long));
    ret_pos = PyMem_Calloc(m, sizeof(long long));
    av = PyMem_Calloc(m, sizeof(int32_t));
    bv = PyMem_Calloc(m, sizeof(int32_t));
    if (!call_pos || !ret_pos || !av || !bv) {
        PyErr_NoMemory();
        goto done;
    }
    if (read_ints(a, n, "a", av) < 0 || read_ints(b, n, "b", bv) < 0 ||
        read_positions(calls, n, "calls", call_pos) < 0 ||
        read_positions(rets, n, "rets", ret_pos) < 0)
        goto done;
    rc = search_setup(S, n, kinds.buf, av, bv, is_ok.buf, call_pos, ret_pos, init, seed,
                      transform);
done:
    PyMem_Free(call_pos);
    PyMem_Free(ret_pos);
    PyMem_Free(av);
    PyMem_Free(bv);
    PyBuffer_Release(&kinds);
    PyBuffer_Release(&is_ok);
    return rc;
}

static PyObject *path_tuple(const int32_t *path, Py_ssize_t len) {
    PyObject *t = PyTuple_New(len);
    if (!t)
        return NULL;
    for (Py_ssize_t k = 0; k < len; k++) {
        PyObject *v = PyLong_FromLong(path[k]);
        if (!v) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, k, v);
    }
    return t;
}

/* (order, state, state before the last op placed or -1): the linearization found, or
 * the deepest configuration reached when refuted. */
static PyObject *Search_outcome(Search *S, PyObject *Py_UNUSED(ignored)) {
    if (S->status == LINEARIZED) {
        PyObject *order = path_tuple(S->st_op, S->depth);
        if (!order)
            return NULL;
        int before = S->depth ? S->st_state[S->depth - 1] : -1;
        return Py_BuildValue("(Nii)", order, (int)S->state, before);
    }
    if (S->status == REFUTED) {
        PyObject *order = path_tuple(S->deep_path, S->deep_len);
        if (!order)
            return NULL;
        return Py_BuildValue("(Nii)", order, (int)S->deep_state, (int)S->deep_before);
    }
    PyErr_SetString(PyExc_RuntimeError, "the search has not ended");
    return NULL;
}

static PyObject *Search_get_steps(Search *S, void *c) { return PyLong_FromLongLong(S->steps); }
static PyObject *Search_get_depth(Search *S, void *c) { return PyLong_FromSsize_t(S->depth); }
static PyObject *Search_get_memo(Search *S, void *c) { return PyLong_FromSize_t(S->m_used); }

static PyGetSetDef Search_getset[] = {
    {"steps", (getter)Search_get_steps, NULL, "candidates tried so far", NULL},
    {"depth", (getter)Search_get_depth, NULL, "operations placed now", NULL},
    {"configurations", (getter)Search_get_memo, NULL, "memo keys", NULL},
    {NULL}};

static PyMethodDef Search_methods[] = {
    {"run", (PyCFunction)Search_run, METH_O,
     "run(limit) -> 0 paused (steps >= limit), 1 linearized, 2 refuted"},
    {"outcome", (PyCFunction)Search_outcome, METH_NOARGS,
     "(order, state id, state id before the last op placed or -1)"},
    {NULL}};

static PyTypeObject SearchType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "etcdspec.checker._wgl.Search",
    .tp_basicsize = sizeof(Search),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One partition's search over flat arrays (checker/compiled_search.py).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Search_init,
    .tp_dealloc = (destructor)Search_dealloc,
    .tp_methods = Search_methods,
    .tp_getset = Search_getset,
};

/* ---- The per-operation work before the search (checker/compiled_search.py) ----------
 *
 * prepare(code, operations, prepared_type, tail, no_key, fallback) -> (list, dropped):
 * the register (code 1) or kv (code 2) model's `prepare_all` in one C pass. It decodes
 * only the common shapes, with exact types (str, dict, list), exactly as the Python loop
 * decodes them inline; every other operation goes to `fallback(op)` (the model's
 * `prepare`), whose None drops it and whose error is the error. So the result is the
 * Python loop's, item for item.
 *
 * flatten(code, items, init) -> (kinds, a, b, is_ok, calls, rets, values, ids) or None:
 * `flat_ops` plus the interning and the Search's arrays in one pass. Values are interned
 * in the dict `ids` in the Python path's order (init, every a, every b; the first object
 * met is the key), so ids are equal exactly when == says so. None (the Python path then
 * decides as before) for a kind it does not know, an unhashable value or NaN. */

enum { CODE_REGISTER = 1, CODE_KV = 2 };

static PyObject *S_type, *S_f, *S_request, *S_response, *S_call, *S_ret;
static PyObject *S_id, *S_key, *S_value, *S_ok, *S_fail, *S_info;
static PyObject *S_read, *S_write, *S_cas, *S_get, *S_put, *S_append, *S_empty;

static int intern_names(void) {
    struct {
        PyObject **slot;
        const char *text;
    } names[] = {{&S_id, "id"},       {&S_type, "type"},   {&S_f, "f"},         {&S_request, "request"},
                 {&S_response, "response"}, {&S_call, "call"}, {&S_ret, "ret"},
                 {&S_key, "key"},     {&S_value, "value"}, {&S_ok, "ok"},
                 {&S_fail, "fail"},   {&S_info, "info"},   {&S_read, "read"},
                 {&S_write, "write"}, {&S_cas, "cas"},     {&S_get, "get"},
                 {&S_put, "put"},     {&S_append, "append"}, {&S_empty, ""}};
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        *names[k].slot = PyUnicode_InternFromString(names[k].text);
        if (!*names[k].slot)
            return -1;
    }
    return 0;
}

/* 1 when `obj` is an exact str equal to `name` (an interned str), else 0. */
static inline int is_name(PyObject *obj, PyObject *name) {
    if (obj == name)
        return 1;
    /* the names are interned, and an interned str is the only one of its value */
    if (!PyUnicode_CheckExact(obj) || PyUnicode_CHECK_INTERNED(obj) ||
        PyUnicode_GET_LENGTH(obj) != PyUnicode_GET_LENGTH(name))
        return 0;
    return PyUnicode_Compare(obj, name) == 0;
}

/* 1 when an exact dict has "key" and no field but "key" and "value" (all exact str). */
static int keyed_shape(PyObject *d) {
    if (!PyDict_CheckExact(d))
        return 0;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    int has_key = 0;
    while (PyDict_Next(d, &pos, &k, &v)) {
        if (is_name(k, S_key))
            has_key = 1;
        else if (!is_name(k, S_value))
            return 0;
    }
    return has_key;
}

static inline int dict_or_list(PyObject *v) { return PyDict_Check(v) || PyList_Check(v); }

/* A new PreparedOp (a tuple subclass): (op, payload, *tail); steals payload. */
static PyObject *new_prepared(PyTypeObject *type, PyObject *op, PyObject *payload,
                              PyObject *tail) {
    if (!payload)
        return NULL;
    Py_ssize_t extra = PyTuple_GET_SIZE(tail);
    PyObject *t = type->tp_alloc(type, 2 + extra);
    if (!t) {
        Py_DECREF(payload);
        return NULL;
    }
    Py_INCREF(op);
    PyTuple_SET_ITEM(t, 0, op);
    PyTuple_SET_ITEM(t, 1, payload);
    for (Py_ssize_t k = 0; k < extra; k++) {
        PyObject *item = PyTuple_GET_ITEM(tail, k);
        Py_INCREF(item);
        PyTuple_SET_ITEM(t, 2 + k, item);
    }
    return t;
}

/* One register operation: 1 decoded into *out (new ref), 0 dropped, 2 not a common
 * shape (the fallback decides), -1 error. */
static int register_one(PyObject *op, PyObject *kind, PyObject *f, PyObject *no_key,
                        PyObject **payload) {
    if (!PyUnicode_CheckExact(kind) || !PyUnicode_CheckExact(f))
        return 2;
    if (is_name(kind, S_fail))
        return 0;
    PyObject *request = PyObject_GetAttr(op, S_request);
    if (!request)
        return -1;
    PyObject *key = no_key, *arg = request; /* borrowed within this call */
    int rc = 2;
    Py_INCREF(key);
    if (PyDict_Check(request)) {
        if (!keyed_shape(request))
            goto out;
        PyObject *raw = PyDict_GetItemWithError(request, S_key);
        if (!raw) {
            rc = PyErr_Occurred() ? -1 : 2;
            goto out;
        }
        if (!PyUnicode_CheckExact(raw)) /* str(k) of anything else: the fallback */
            goto out;
        Py_DECREF(key);
        Py_INCREF(raw);
        key = raw;
        arg = PyDict_GetItemWithError(request, S_value);
        if (!arg) {
            if (PyErr_Occurred()) {
                rc = -1;
                goto out;
            }
            arg = Py_None;
        }
    }
    if (is_name(f, S_read)) {
        if (is_name(kind, S_info)) {
            rc = 0;
            goto out;
        }
        PyObject *value = PyObject_GetAttr(op, S_response);
        if (!value) {
            rc = -1;
            goto out;
        }
        PyObject *got = value;
        if (PyDict_Check(value)) {
            if (!keyed_shape(value)) {
                Py_DECREF(value);
                goto out;
            }
            got = PyDict_GetItemWithError(value, S_value);
            if (!got) {
                if (PyErr_Occurred()) {
                    Py_DECREF(value);
                    rc = -1;
                    goto out;
                }
                got = Py_None;
            }
        }
        if (!dict_or_list(got)) {
            *payload = PyTuple_Pack(3, key, f, got);
            rc = *payload ? 1 : -1;
        }
        Py_DECREF(value);
    } else if (is_name(f, S_write)) {
        if (!dict_or_list(arg)) {
            *payload = PyTuple_Pack(3, key, f, arg);
            rc = *payload ? 1 : -1;
        }
    } else if (is_name(f, S_cas)) {
        if (PyList_CheckExact(arg) && PyList_GET_SIZE(arg) == 2 &&
            !dict_or_list(PyList_GET_ITEM(arg, 0)) && !dict_or_list(PyList_GET_ITEM(arg, 1))) {
            PyObject *pair = PyTuple_Pack(2, PyList_GET_ITEM(arg, 0), PyList_GET_ITEM(arg, 1));
            if (!pair) {
                rc = -1;
                goto out;
            }
            *payload = PyTuple_Pack(3, key, f, pair);
            Py_DECREF(pair);
            rc = *payload ? 1 : -1;
        }
    }
out:
    Py_DECREF(key);
    Py_DECREF(request);
    return rc;
}

/* One kv operation, as register_one. */
static int kv_one(PyObject *op, PyObject *kind, PyObject *f, PyObject **payload) {
    if (!PyUnicode_CheckExact(kind) || !PyUnicode_CheckExact(f))
        return 2;
    if (is_name(kind, S_fail))
        return 0;
    PyObject *request = PyObject_GetAttr(op, S_request);
    if (!request)
        return -1;
    int rc = 2;
    if (!PyDict_CheckExact(request))
        goto out;
    PyObject *key = PyDict_GetItemWithError(request, S_key);
    if (!key) {
        rc = PyErr_Occurred() ? -1 : 2;
        goto out;
    }
    if (!PyUnicode_CheckExact(key))
        goto out;
    if (is_name(f, S_get)) {
        if (is_name(kind, S_info)) {
            rc = 0;
            goto out;
        }
        PyObject *response = PyObject_GetAttr(op, S_response);
        if (!response) {
            rc = -1;
            goto out;
        }
        if (PyDict_CheckExact(response)) {
            PyObject *value = PyDict_GetItemWithError(response, S_value);
            if (!value && PyErr_Occurred())
                rc = -1;
            else if (value && (value == Py_None || PyUnicode_CheckExact(value))) {
                *payload = PyTuple_Pack(3, key, f, value);
                rc = *payload ? 1 : -1;
            }
        }
        Py_DECREF(response);
    } else if (is_name(f, S_put) || is_name(f, S_append)) {
        PyObject *value = PyDict_GetItemWithError(request, S_value);
        if (!value && PyErr_Occurred())
            rc = -1;
        else if (value && PyUnicode_CheckExact(value)) {
            *payload = PyTuple_Pack(3, key, f, value);
            rc = *payload ? 1 : -1;
        }
    }
out:
    Py_DECREF(request);
    return rc;
}

static PyObject *wgl_prepare(PyObject *self, PyObject *args) {
    int code;
    PyObject *operations, *tail, *no_key, *fallback;
    PyTypeObject *type;
    if (!PyArg_ParseTuple(args, "iOO!O!UO", &code, &operations, &PyType_Type, &type,
                          &PyTuple_Type, &tail, &no_key, &fallback))
        return NULL;
    if (code != CODE_REGISTER && code != CODE_KV) {
        PyErr_Format(PyExc_ValueError, "prepare: model code %d is not 1 or 2", code);
        return NULL;
    }
    if (!PyType_IsSubtype(type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "prepare: the prepared type must be a tuple type");
        return NULL;
    }
    PyObject *fast = PySequence_Fast(operations, "prepare: operations must be a sequence");
    if (!fast)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast), dropped = 0;
    PyObject **ops = PySequence_Fast_ITEMS(fast);
    PyObject *out = PyList_New(0);
    if (!out)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *op = ops[i], *payload = NULL, *item = NULL;
        PyObject *kind = PyObject_GetAttr(op, S_type);
        if (!kind)
            goto fail;
        PyObject *f = PyObject_GetAttr(op, S_f);
        if (!f) {
            Py_DECREF(kind);
            goto fail;
        }
        int rc = code == CODE_REGISTER ? register_one(op, kind, f, no_key, &payload)
                                       : kv_one(op, kind, f, &payload);
        Py_DECREF(kind);
        Py_DECREF(f);
        if (rc < 0)
            goto fail;
        if (rc == 0) {
            dropped++;
            continue;
        }
        if (rc == 1) {
            item = new_prepared(type, op, payload, tail);
        } else {
            item = PyObject_CallOneArg(fallback, op);
            if (item == Py_None) {
                Py_DECREF(item);
                dropped++;
                continue;
            }
        }
        if (!item)
            goto fail;
        int bad = PyList_Append(out, item);
        Py_DECREF(item);
        if (bad < 0)
            goto fail;
    }
    Py_DECREF(fast);
    return Py_BuildValue("(Nn)", out, dropped);
fail:
    Py_XDECREF(out);
    Py_DECREF(fast);
    return NULL;
}

static long intern_value(PyObject *ids, PyObject *values, PyObject *value) {
    if (PyUnicode_CheckExact(value) || PyLong_CheckExact(value) || value == Py_None) {
        /* equal to itself: one probe finds it or puts the next id in */
        Py_ssize_t next = PyList_GET_SIZE(values);
        PyObject *fresh = PyLong_FromSsize_t(next);
        if (!fresh)
            return -1;
        PyObject *found = PyDict_SetDefault(ids, value, fresh);
        Py_DECREF(fresh); /* the dict holds it when it went in */
        if (!found)
            return -1;
        if (found != fresh)
            return PyLong_AsLong(found);
        return PyList_Append(values, value) < 0 ? -1 : (long)next;
    }
    PyObject *found = PyDict_GetItemWithError(ids, value);
    if (found)
        return PyLong_AsLong(found);
    if (PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            return -2;
        }
        return -1;
    }
    if (PyUnicode_CheckExact(value) || PyLong_CheckExact(value) || value == Py_None)
        goto fresh; /* equal to itself: only a float (or an object's __ne__) may not be */
    PyObject *ne = PyObject_RichCompare(value, value, Py_NE);
    if (!ne)
        return -1;
    int differs = PyObject_IsTrue(ne);
    Py_DECREF(ne);
    if (differs < 0)
        return -1;
    if (differs)
        return -2;
fresh:;
    Py_ssize_t id = PyList_GET_SIZE(values);
    PyObject *key = PyLong_FromSsize_t(id);
    if (!key)
        return -1;
    int bad = PyDict_SetItem(ids, value, key) < 0 || PyList_Append(values, value) < 0;
    Py_DECREF(key);
    return bad ? -1 : (long)id;
}

static PyObject *wgl_flatten(PyObject *self, PyObject *args) {
    int code;
    PyObject *items, *init;
    if (!PyArg_ParseTuple(args, "iOO", &code, &items, &init))
        return NULL;
    if (code != CODE_REGISTER && code != CODE_KV) {
        PyErr_Format(PyExc_ValueError, "flatten: model code %d is not 1 or 2", code);
        return NULL;
    }
    PyObject *fast = PySequence_Fast(items, "flatten: items must be a sequence");
    if (!fast)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject **its = PySequence_Fast_ITEMS(fast);
    PyObject *kinds = PyBytes_FromStringAndSize(NULL, n);
    PyObject *is_ok = PyBytes_FromStringAndSize(NULL, n);
    PyObject *a = PyList_New(n), *b = PyList_New(n), *calls = PyList_New(n);
    PyObject *rets = PyList_New(n), *values = PyList_New(0), *ids = PyDict_New();
    PyObject **bv = PyMem_Calloc((size_t)n + 1, sizeof(PyObject *)); /* borrowed b values */
    PyObject *result = NULL;
    if (!kinds || !is_ok || !a || !b || !calls || !rets || !values || !ids || !bv)
        goto done;
    char *kb = PyBytes_AS_STRING(kinds), *ob = PyBytes_AS_STRING(is_ok);
    long id = intern_value(ids, values, init);
    if (id == -1)
        goto done;
    if (id == -2)
        goto none;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = its[i];
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) < 2)
            goto none;
        PyObject *op = PyTuple_GET_ITEM(item, 0), *payload = PyTuple_GET_ITEM(item, 1);
        if (!PyTuple_CheckExact(payload) || PyTuple_GET_SIZE(payload) != 3)
            goto none;
        PyObject *f = PyTuple_GET_ITEM(payload, 1), *arg = PyTuple_GET_ITEM(payload, 2);
        PyObject *first = arg, *second = Py_None;
        if (code == CODE_REGISTER) {
            if (is_name(f, S_read))
                kb[i] = K_READ;
            else if (is_name(f, S_write))
                kb[i] = K_SET;
            else if (is_name(f, S_cas) && PyTuple_CheckExact(arg) && PyTuple_GET_SIZE(arg) == 2) {
                kb[i] = K_CAS;
                first = PyTuple_GET_ITEM(arg, 0);
                second = PyTuple_GET_ITEM(arg, 1);
            } else
                goto none;
        } else {
            if (is_name(f, S_get))
                kb[i] = K_READ;
            else if (is_name(f, S_put))
                kb[i] = K_SET;
            else if (is_name(f, S_append))
                kb[i] = K_TRANSFORM;
            else
                goto none;
        }
        bv[i] = second;
        id = intern_value(ids, values, first);
        if (id == -1)
            goto done;
        if (id == -2)
            goto none;
        PyObject *num = PyLong_FromLong(id);
        if (!num)
            goto done;
        PyList_SET_ITEM(a, i, num);
        PyObject *kind = PyObject_GetAttr(op, S_type);
        if (!kind)
            goto done;
        int ok = PyObject_RichCompareBool(kind, S_ok, Py_EQ);
        Py_DECREF(kind);
        if (ok < 0)
            goto done;
        ob[i] = (char)ok;
        PyObject *call = PyObject_GetAttr(op, S_call);
        if (!call)
            goto done;
        PyList_SET_ITEM(calls, i, call);
        PyObject *ret = PyObject_GetAttr(op, S_ret);
        if (!ret)
            goto done;
        PyList_SET_ITEM(rets, i, ret);
    }
    for (Py_ssize_t i = 0; i < n; i++) { /* b after every a: the Python path's order */
        id = intern_value(ids, values, bv[i]);
        if (id == -1)
            goto done;
        if (id == -2)
            goto none;
        PyObject *num = PyLong_FromLong(id);
        if (!num)
            goto done;
        PyList_SET_ITEM(b, i, num);
    }
    result = PyTuple_Pack(8, kinds, a, b, is_ok, calls, rets, values, ids);
    goto done;
none:
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(bv);
    Py_DECREF(fast);
    Py_XDECREF(kinds);
    Py_XDECREF(is_ok);
    Py_XDECREF(a);
    Py_XDECREF(b);
    Py_XDECREF(calls);
    Py_XDECREF(rets);
    Py_XDECREF(values);
    Py_XDECREF(ids);
    return result;
}

/* group(items) -> {payload[0]: [item, ...]}: the register and kv models' partitions, in
 * first-seen key order, as a dict's setdefault loop builds them. */
static PyObject *wgl_group(PyObject *self, PyObject *items) {
    PyObject *fast = PySequence_Fast(items, "group: items must be a sequence");
    if (!fast)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject **its = PySequence_Fast_ITEMS(fast);
    PyObject *parts = PyDict_New(), *last_key = NULL, *last_list = NULL;
    if (!parts)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = its[i];
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) < 2 ||
            !PyTuple_Check(PyTuple_GET_ITEM(item, 1)) ||
            PyTuple_GET_SIZE(PyTuple_GET_ITEM(item, 1)) < 1) {
            PyErr_SetString(PyExc_TypeError, "group: items must be (op, (key, ...), ...)");
            goto fail;
        }
        PyObject *key = PyTuple_GET_ITEM(PyTuple_GET_ITEM(item, 1), 0);
        PyObject *list;
        if (key == last_key) { /* runs of one key: no lookup */
            list = last_list;
        } else {
            list = PyDict_GetItemWithError(parts, key);
            if (!list) {
                if (PyErr_Occurred())
                    goto fail;
                list = PyList_New(0);
                if (!list)
                    goto fail;
                int bad = PyDict_SetItem(parts, key, list);
                Py_DECREF(list); /* the dict holds it */
                if (bad < 0)
                    goto fail;
            }
            last_key = key;
            last_list = list;
        }
        if (PyList_Append(list, item) < 0)
            goto fail;
    }
    Py_DECREF(fast);
    return parts;
fail:
    Py_XDECREF(parts);
    Py_DECREF(fast);
    return NULL;
}

/* infos(items) -> how many items' operations are not "ok" (a partition's difficulty). */
static PyObject *wgl_infos(PyObject *self, PyObject *items) {
    PyObject *fast = PySequence_Fast(items, "infos: items must be a sequence");
    if (!fast)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast), infos = 0;
    PyObject **its = PySequence_Fast_ITEMS(fast);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = its[i];
        PyObject *op = PyTuple_Check(item) && PyTuple_GET_SIZE(item) > 0
                           ? PyTuple_GET_ITEM(item, 0)
                           : NULL;
        PyObject *kind = op ? PyObject_GetAttr(op, S_type) : NULL;
        if (!kind) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "infos: items must be (op, ...)");
            Py_DECREF(fast);
            return NULL;
        }
        int ok = PyObject_RichCompareBool(kind, S_ok, Py_EQ);
        Py_DECREF(kind);
        if (ok < 0) {
            Py_DECREF(fast);
            return NULL;
        }
        infos += !ok;
    }
    Py_DECREF(fast);
    return PyLong_FromSsize_t(infos);
}

/* op_ids(items, order) -> tuple of items[i].op.id for i in order (a linearization); an
 * item may also be the operation itself (the fused pass's partitions). */
static PyObject *wgl_op_ids(PyObject *self, PyObject *args) {
    PyObject *items, *order;
    if (!PyArg_ParseTuple(args, "O!O", &PyList_Type, &items, &order))
        return NULL;
    PyObject *fast = PySequence_Fast(order, "op_ids: order must be a sequence");
    if (!fast)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject **idx = PySequence_Fast_ITEMS(fast);
    PyObject *out = PyTuple_New(n);
    if (!out)
        goto fail;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t i = PyLong_AsSsize_t(idx[k]);
        if (i == -1 && PyErr_Occurred())
            goto fail;
        if (i < 0 || i >= PyList_GET_SIZE(items)) {
            PyErr_Format(PyExc_IndexError, "op_ids: %zd is not an item", i);
            goto fail;
        }
        PyObject *item = PyList_GET_ITEM(items, i); /* (op, ...), or the op itself */
        if (PyTuple_Check(item) && PyTuple_GET_SIZE(item) < 1) {
            PyErr_SetString(PyExc_TypeError, "op_ids: items must be (op, ...) or operations");
            goto fail;
        }
        PyObject *op = PyTuple_Check(item) ? PyTuple_GET_ITEM(item, 0) : item;
        PyObject *id = PyObject_GetAttr(op, S_id);
        if (!id)
            goto fail;
        PyTuple_SET_ITEM(out, k, id);
    }
    Py_DECREF(fast);
    return out;
fail:
    Py_XDECREF(out);
    Py_DECREF(fast);
    return NULL;
}

/* ---- The fused pass: operations straight to partitions' searches --------------------
 *
 * fuse(code, operations, op_type, no_key, init, seed) -> None or (dropped, parts): the
 * register (code 1) or kv (code 2) model's prepare, partitions and flat arrays in one pass
 * over the Operation objects, with no PreparedOp or payload built. parts is a list, in
 * first-seen key order, of (key, ops, search, values, infos): the partition's operations
 * (a list, in history order), its Search (seeded with `seed`, from the state `init`;
 * kv's with an Appender), the interned values (as flatten interns them: init, every a,
 * every b) and how many of its operations are info. Only the common shapes are taken,
 * with exact types (an Operation of exactly `op_type`; str kinds and keys; values None,
 * bool, int, float or str; int positions): on anything else (an operation `prepare` must
 * decide, NaN, a position that is not an int) it returns None and builds nothing, and the
 * caller runs the separate passes, so their items and errors. */

typedef struct {
    PyObject *key; /* borrowed (the operations hold it) */
    PyObject *ops; /* a list */
    Py_ssize_t n, cap, infos;
    uint8_t *kind, *ok;
    PyObject **av, **bv; /* borrowed */
    long long *call, *ret;
    long long *id; /* each operation's id, while every one is an int (ids_ok) */
    int ids_ok;
} Part;

static void part_free(Part *P) {
    Py_XDECREF(P->ops);
    PyMem_Free(P->kind);
    PyMem_Free(P->ok);
    PyMem_Free(P->av);
    PyMem_Free(P->bv);
    PyMem_Free(P->call);
    PyMem_Free(P->ret);
    PyMem_Free(P->id);
}

static int part_grow(Part *P) {
    size_t cap = P->cap ? (size_t)P->cap * 2 : 16;
    void *k = PyMem_Realloc(P->kind, cap);
    if (k)
        P->kind = k;
    void *o = PyMem_Realloc(P->ok, cap);
    if (o)
        P->ok = o;
    void *a = PyMem_Realloc(P->av, cap * sizeof(PyObject *));
    if (a)
        P->av = a;
    void *b = PyMem_Realloc(P->bv, cap * sizeof(PyObject *));
    if (b)
        P->bv = b;
    void *c = PyMem_Realloc(P->call, cap * sizeof(long long));
    if (c)
        P->call = c;
    void *r = PyMem_Realloc(P->ret, cap * sizeof(long long));
    if (r)
        P->ret = r;
    void *d = PyMem_Realloc(P->id, cap * sizeof(long long));
    if (d)
        P->id = d;
    if (!k || !o || !a || !b || !c || !r || !d) {
        PyErr_NoMemory();
        return -1;
    }
    P->cap = (Py_ssize_t)cap;
    return 0;
}

/* A register value the fused pass interns without running Python code. */
static inline int plain_scalar(PyObject *v) {
    return v == Py_None || PyBool_Check(v) || PyLong_CheckExact(v) || PyFloat_CheckExact(v) ||
           PyUnicode_CheckExact(v);
}

/* An Operation's attributes as the fused pass reads them. PyObject_GetAttr finds an
 * instance attribute in two hashed lookups (the type's attribute cache, then the class's
 * shared key table) before it reads the value from the instance's values array; with a
 * thousand operations of seven attributes each, that was a third of the pass. Where
 * CPython 3.11 keeps the instance's attributes in that array (a class with a managed
 * dict, the generic getattr, no class attribute of the name, and an instance whose dict
 * was never made), the pass looks each name's index up once per call, in the class's
 * shared keys, and reads the array directly; anything else (another Python, another
 * layout, a missing value) goes through PyObject_GetAttr, so the value is the same. */
enum { A_ID, A_TYPE, A_F, A_REQUEST, A_RESPONSE, A_CALL, A_RET, N_ATTRS };

typedef struct {
    int direct;            /* the indices below are usable */
    Py_ssize_t ix[N_ATTRS]; /* each name's index in the instances' values arrays */
} OpSlots;

static PyObject **attr_names[N_ATTRS] = {&S_id,       &S_type, &S_f,  &S_request,
                                         &S_response, &S_call, &S_ret};

static void op_slots(PyTypeObject *tp, OpSlots *slots) {
    slots->direct = 0;
#ifdef WGL_INLINE_VALUES
    if (!(tp->tp_flags & Py_TPFLAGS_MANAGED_DICT) || !(tp->tp_flags & Py_TPFLAGS_HEAPTYPE) ||
        tp->tp_getattro != PyObject_GenericGetAttr)
        return;
    PyDictKeysObject *keys = ((PyHeapTypeObject *)tp)->ht_cached_keys;
    if (!keys || !DK_IS_UNICODE(keys))
        return;
    PyDictUnicodeEntry *entries = DK_UNICODE_ENTRIES(keys);
    for (int k = 0; k < N_ATTRS; k++) {
        PyObject *name = *attr_names[k];
        if (_PyType_Lookup(tp, name) != NULL) /* a class attribute: getattr decides */
            return;
        slots->ix[k] = -1;
        for (Py_ssize_t e = 0; e < keys->dk_nentries; e++) {
            if (entries[e].me_key == name) { /* both interned */
                slots->ix[k] = e;
                break;
            }
        }
        if (slots->ix[k] < 0)
            return;
    }
    slots->direct = 1;
#endif
}

/* The attribute `which` of op (borrowed: op holds it), or NULL with an error. */
static inline PyObject *op_attr(PyObject *op, const OpSlots *slots, int which) {
#ifdef WGL_INLINE_VALUES
    if (slots && slots->direct) {
        /* 3.11: the values array's pointer is the fourth word before the object */
        PyDictValues *values = *((PyDictValues **)op - 4);
        if (values) {
            PyObject *v = values->values[slots->ix[which]];
            if (v)
                return v;
        }
    }
#endif
    PyObject *v = PyObject_GetAttr(op, *attr_names[which]);
    if (v)
        Py_DECREF(v); /* the operation holds it */
    return v;
}

/* One operation decoded for the fused pass: 1 (key, kind, a, b set, borrowed), 0 dropped,
 * 2 not a common shape, -1 error. `kind` and `f` are exact str. */
static int register_flat(PyObject *op, const OpSlots *slots, PyObject *kind, PyObject *f,
                         PyObject *no_key, PyObject **key, uint8_t *k, PyObject **a,
                         PyObject **b) {
    if (is_name(kind, S_fail))
        return 0;
    PyObject *request = op_attr(op, slots, A_REQUEST);
    if (!request)
        return -1;
    PyObject *arg = request;
    *key = no_key;
    *b = Py_None;
    if (PyDict_Check(request)) {
        if (!keyed_shape(request))
            return 2;
        PyObject *raw = PyDict_GetItemWithError(request, S_key);
        if (!raw)
            return PyErr_Occurred() ? -1 : 2;
        if (!PyUnicode_CheckExact(raw))
            return 2;
        *key = raw;
        arg = PyDict_GetItemWithError(request, S_value);
        if (!arg) {
            if (PyErr_Occurred())
                return -1;
            arg = Py_None;
        }
    }
    if (is_name(f, S_read)) {
        if (is_name(kind, S_info))
            return 0;
        PyObject *value = op_attr(op, slots, A_RESPONSE);
        if (!value)
            return -1;
        PyObject *got = value;
        if (PyDict_Check(value)) {
            if (!keyed_shape(value))
                return 2;
            got = PyDict_GetItemWithError(value, S_value);
            if (!got) {
                if (PyErr_Occurred())
                    return -1;
                got = Py_None;
            }
        }
        if (!plain_scalar(got))
            return 2;
        *k = K_READ;
        *a = got;
        return 1;
    }
    if (is_name(f, S_write)) {
        if (!plain_scalar(arg))
            return 2;
        *k = K_SET;
        *a = arg;
        return 1;
    }
    if (is_name(f, S_cas) && PyList_CheckExact(arg) && PyList_GET_SIZE(arg) == 2 &&
        plain_scalar(PyList_GET_ITEM(arg, 0)) && plain_scalar(PyList_GET_ITEM(arg, 1))) {
        *k = K_CAS;
        *a = PyList_GET_ITEM(arg, 0);
        *b = PyList_GET_ITEM(arg, 1);
        return 1;
    }
    return 2;
}

/* As register_flat, for the kv model. */
static int kv_flat(PyObject *op, const OpSlots *slots, PyObject *kind, PyObject *f,
                   PyObject **key, uint8_t *k, PyObject **a, PyObject **b) {
    if (is_name(kind, S_fail))
        return 0;
    PyObject *request = op_attr(op, slots, A_REQUEST);
    if (!request)
        return -1;
    *b = Py_None;
    if (!PyDict_CheckExact(request))
        return 2;
    *key = PyDict_GetItemWithError(request, S_key);
    if (!*key)
        return PyErr_Occurred() ? -1 : 2;
    if (!PyUnicode_CheckExact(*key))
        return 2;
    if (is_name(f, S_get)) {
        if (is_name(kind, S_info))
            return 0;
        PyObject *response = op_attr(op, slots, A_RESPONSE);
        if (!response)
            return -1;
        if (!PyDict_CheckExact(response))
            return 2;
        PyObject *value = PyDict_GetItemWithError(response, S_value);
        if (!value)
            return PyErr_Occurred() ? -1 : 2;
        if (value != Py_None && !PyUnicode_CheckExact(value))
            return 2;
        *k = K_READ;
        *a = value;
        return 1;
    }
    int put = is_name(f, S_put);
    if (put || is_name(f, S_append)) {
        PyObject *value = PyDict_GetItemWithError(request, S_value);
        if (!value)
            return PyErr_Occurred() ? -1 : 2;
        if (!PyUnicode_CheckExact(value))
            return 2;
        *k = put ? K_SET : K_TRANSFORM;
        *a = value;
        return 1;
    }
    return 2;
}

/* An exact int attribute as a position: 1 (set), 0 not one (None gives -1 when
 * `none_ok`), -1 error. Positions must be >= 0. */
static int position_attr(PyObject *op, const OpSlots *slots, int which, int none_ok,
                         long long *out) {
    PyObject *v = op_attr(op, slots, which);
    if (!v)
        return -1;
    int rc = 0;
    if (v == Py_None) {
        if (none_ok) {
            *out = -1;
            rc = 1;
        }
    } else if (PyLong_CheckExact(v)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (!overflow && x >= 0) {
            *out = x;
            rc = 1;
        }
    }
    return rc;
}

/* An attribute that is an exact int (any sign) fitting a long long: 1 (set), 0 not one,
 * -1 error. */
static int int_attr(PyObject *op, const OpSlots *slots, int which, long long *out) {
    PyObject *v = op_attr(op, slots, which);
    if (!v)
        return -1;
    int rc = 0;
    if (PyLong_CheckExact(v)) {
        int overflow = 0;
        *out = PyLong_AsLongLongAndOverflow(v, &overflow);
        rc = !overflow && !(*out == -1 && PyErr_Occurred());
    }
    return rc;
}

/* The `n` values of `src` interned, their ids into `dst`, None looked up only once
 * (*none_id: its id, or -1 until it is met): 0, or the first failure of intern_value
 * (-1: an error is set; -2: not internable, no error). */
static long intern_column(PyObject *ids, PyObject *values, PyObject *const *src, int32_t *dst,
                          Py_ssize_t n, long *none_id) {
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = src[i];
        if (v == Py_None && *none_id >= 0) {
            dst[i] = (int32_t)*none_id;
            continue;
        }
        long id = intern_value(ids, values, v);
        if (id < 0)
            return id;
        dst[i] = (int32_t)id;
        if (v == Py_None)
            *none_id = id;
    }
    return 0;
}

/* The Search of one partition, with its values interned; NULL with an error, or NULL
 * without one when a value cannot be interned (NaN). */
static PyObject *part_search(Part *P, int code, PyObject *init, uint64_t seed,
                             PyObject *values) {
    /* sized for a value per operation (kv's puts and appends are mostly distinct): no
     * rehash as it fills */
    PyObject *ids = _PyDict_NewPresized(P->n + 1), *search = NULL, *transform = NULL;
    int32_t *a = PyMem_Calloc((size_t)P->n + 1, sizeof(int32_t));
    int32_t *b = PyMem_Calloc((size_t)P->n + 1, sizeof(int32_t));
    if (!ids || !a || !b) {
        if (ids)
            PyErr_NoMemory();
        goto done;
    }
    /* None (every kv b, a register write's b, an absent key's get) is looked up once:
     * the same ids, in the same order, as interning it each time. */
    long id = intern_value(ids, values, init), none_id = init == Py_None ? id : -1;
    if (id >= 0)
        id = intern_column(ids, values, P->av, a, P->n, &none_id);
    if (id >= 0)
        id = intern_column(ids, values, P->bv, b, P->n, &none_id);
    if (id < 0)
        goto done; /* -1: an error is set; -2: not internable, no error */
    if (code == CODE_KV) {
        transform = PyObject_CallFunctionObjArgs((PyObject *)&AppenderType, values, ids, Py_None,
                                                 NULL);
        if (!transform)
            goto done;
    }
    search = PyType_GenericNew(&SearchType, NULL, NULL);
    if (!search)
        goto done;
    if (search_setup((Search *)search, P->n, P->kind, a, b, P->ok, P->call, P->ret, 0, seed,
                     transform ? transform : Py_None) < 0) {
        Py_CLEAR(search);
    } else if (P->ids_ok) {
        ((Search *)search)->op_id = P->id; /* the Search owns them now */
        P->id = NULL;
    }
done:
    PyMem_Free(a);
    PyMem_Free(b);
    Py_XDECREF(ids);
    Py_XDECREF(transform);
    return search;
}

/* The fused pass: the list of (key, ops, search, values, infos) in first-seen key order,
 * with the count of operations dropped in *dropped_out; None (a new reference) when it
 * does not take the history; NULL with an error. `code` is 1 or 2. */
static PyObject *fuse_parts(int code, PyObject *operations, PyTypeObject *op_type,
                            PyObject *no_key, PyObject *init, unsigned long long seed,
                            Py_ssize_t *dropped_out) {
    PyObject *fast = PySequence_Fast(operations, "fuse: operations must be a sequence");
    if (!fast)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast), dropped = 0, nparts = 0, cap = 0;
    PyObject **ops = PySequence_Fast_ITEMS(fast);
    PyObject *index = PyDict_New(), *result = NULL, *last_key = NULL;
    Part *parts = NULL, *last = NULL;
    if (!index)
        goto done;
    OpSlots slots;
    op_slots(op_type, &slots);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *op = ops[i];
        if (Py_TYPE(op) != op_type)
            goto unusual;
        PyObject *kind = op_attr(op, &slots, A_TYPE);
        if (!kind)
            goto done;
        PyObject *f = op_attr(op, &slots, A_F);
        if (!f)
            goto done;
        if (!PyUnicode_CheckExact(kind) || !PyUnicode_CheckExact(f))
            goto unusual;
        PyObject *key = NULL, *a = NULL, *b = NULL;
        uint8_t k = 0;
        int rc = code == CODE_REGISTER
                     ? register_flat(op, &slots, kind, f, no_key, &key, &k, &a, &b)
                     : kv_flat(op, &slots, kind, f, &key, &k, &a, &b);
        if (rc < 0)
            goto done;
        if (rc == 0) {
            dropped++;
            continue;
        }
        if (rc == 2)
            goto unusual;
        long long call, ret, id = -1;
        int got = position_attr(op, &slots, A_CALL, 0, &call);
        if (got == 1)
            got = position_attr(op, &slots, A_RET, 1, &ret);
        if (got < 0)
            goto done;
        if (got == 0)
            goto unusual;
        /* The id, for the linearization's ids (first_turns): read here, where the
         * operation is in cache; any id that is not an int is read there instead. */
        int id_ok = int_attr(op, &slots, A_ID, &id);
        if (id_ok < 0)
            goto done;
        Part *P = last;
        if (key != last_key) {
            PyObject *at = PyDict_GetItemWithError(index, key);
            if (at) {
                P = parts + PyLong_AsSsize_t(at);
            } else {
                if (PyErr_Occurred())
                    goto done;
                if (nparts == cap) {
                    Py_ssize_t more = cap ? cap * 2 : 8;
                    Part *grown = PyMem_Realloc(parts, (size_t)more * sizeof(Part));
                    if (!grown) {
                        PyErr_NoMemory();
                        goto done;
                    }
                    memset(grown + cap, 0, (size_t)(more - cap) * sizeof(Part));
                    parts = grown;
                    cap = more;
                }
                P = parts + nparts;
                P->key = key;
                P->ids_ok = 1;
                P->ops = PyList_New(0);
                if (!P->ops)
                    goto done;
                PyObject *num = PyLong_FromSsize_t(nparts++);
                if (!num)
                    goto done;
                int bad = PyDict_SetItem(index, key, num);
                Py_DECREF(num);
                if (bad < 0)
                    goto done;
            }
            last_key = key;
            last = P;
        }
        if (P->n == P->cap && part_grow(P) < 0)
            goto done;
        if (PyList_Append(P->ops, op) < 0)
            goto done;
        int ok = is_name(kind, S_ok);
        P->kind[P->n] = k;
        P->ok[P->n] = (uint8_t)ok;
        P->av[P->n] = a;
        P->bv[P->n] = b;
        P->call[P->n] = call;
        P->ret[P->n] = ret;
        P->id[P->n] = id;
        P->ids_ok &= id_ok;
        P->infos += !ok;
        P->n++;
    }
    PyObject *list = PyList_New(nparts);
    if (!list)
        goto done;
    for (Py_ssize_t p = 0; p < nparts; p++) {
        Part *P = parts + p;
        PyObject *values = PyList_New(0);
        if (!values) {
            Py_DECREF(list);
            goto done;
        }
        PyObject *search = part_search(P, code, init, (uint64_t)seed, values);
        if (!search) {
            Py_DECREF(values);
            Py_DECREF(list);
            if (PyErr_Occurred())
                goto done;
            goto unusual;
        }
        PyObject *entry = Py_BuildValue("(OONNn)", P->key, P->ops, search, values, P->infos);
        if (!entry) {
            Py_DECREF(list);
            goto done;
        }
        PyList_SET_ITEM(list, p, entry);
    }
    result = list;
    *dropped_out = dropped;
    goto done;
unusual:
    result = Py_NewRef(Py_None);
done:
    for (Py_ssize_t p = 0; p < nparts; p++)
        part_free(parts + p);
    PyMem_Free(parts);
    Py_XDECREF(index);
    Py_DECREF(fast);
    return result;
}

static PyObject *wgl_fuse(PyObject *self, PyObject *args) {
    int code;
    PyObject *operations, *no_key, *init;
    PyTypeObject *op_type;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "iOO!UOK", &code, &operations, &PyType_Type, &op_type, &no_key,
                          &init, &seed))
        return NULL;
    if (code != CODE_REGISTER && code != CODE_KV) {
        PyErr_Format(PyExc_ValueError, "fuse: model code %d is not 1 or 2", code);
        return NULL;
    }
    Py_ssize_t dropped = 0;
    PyObject *list = fuse_parts(code, operations, op_type, no_key, init, seed, &dropped);
    if (!list || list == Py_None)
        return list;
    return Py_BuildValue("(nN)", dropped, list);
}

/* ---- The fused partitions' first turns, driven in C ------------------------------
 *
 * first_turns(code, parts, turn, check_every, check, out_of_budget, deadline)
 *   -> (done, stopped_seconds, out): parts are the fused partitions (ops, search, values,
 *   ...) in turn order. Each gets its first turn as compiled_search.compiled_first_turn
 *   runs it: check() first, then the search in runs of at most check_every steps with
 *   check() after each that reaches a multiple of it, until `turn` steps or the end.
 *   done lists, for the partitions that turn linearized (a prefix of parts), (operation
 *   ids of the linearization, the state object, steps, seconds); the first partition
 *   not linearized in its turn (paused, refuted, or `out_of_budget` raised by check(),
 *   which is then cleared: out is 1) ends the call, with the seconds its turn took. The
 *   state object is the model stepper's: the last operation's own argument (a read's
 *   value, a write's, a cas's new value) or, for kv's append, (state before or "") +
 *   its value; so the results are the separate passes'. */

static double monotonic_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The state after the last operation placed, as the model's stepper gives it (new ref). */
static PyObject *stepped_state(int code, PyObject *op, PyObject *values, int32_t before) {
    PyObject *kind = PyObject_GetAttr(op, S_type);
    if (!kind)
        return NULL;
    Py_DECREF(kind);
    PyObject *f = PyObject_GetAttr(op, S_f);
    if (!f)
        return NULL;
    Py_DECREF(f);
    PyObject *key = NULL, *a = NULL, *b = NULL;
    uint8_t k = 0;
    int rc = -1;
    if (PyUnicode_CheckExact(kind) && PyUnicode_CheckExact(f))
        rc = code == CODE_REGISTER ? register_flat(op, NULL, kind, f, Py_None, &key, &k, &a, &b)
                                   : kv_flat(op, NULL, kind, f, &key, &k, &a, &b);
    if (rc < 0 && PyErr_Occurred())
        return NULL;
    if (rc != 1) {
        PyErr_SetString(PyExc_RuntimeError, "first_turns: an operation the fused pass took "
                                            "no longer decodes");
        return NULL;
    }
    if (k == K_CAS)
        return Py_NewRef(b);
    if (k != K_TRANSFORM)
        return Py_NewRef(a);
    if (before < 0 || before >= PyList_GET_SIZE(values)) {
        PyErr_SetString(PyExc_RuntimeError, "first_turns: no state before the append");
        return NULL;
    }
    PyObject *head = PyList_GET_ITEM(values, before);
    if (head == Py_None)
        return Py_NewRef(a); /* "" + a is a itself */
    return PyUnicode_Concat(head, a);
}

/* check(): 0 passed, 2 `out_of_budget` raised (cleared), -1 any other error. Not called
 * while the clock is before `deadline` (CLOCK_MONOTONIC, as time.monotonic): the caller
 * passes its time limit when check() tests nothing else, -inf when it must always run
 * (a memory bound); so a check of many small partitions makes no Python call per turn. */
static int call_check(PyObject *check, PyObject *out_of_budget, double deadline) {
    if (monotonic_seconds() <= deadline)
        return 0;
    PyObject *ok = PyObject_CallNoArgs(check);
    if (ok) {
        Py_DECREF(ok);
        return 0;
    }
    if (PyErr_ExceptionMatches(out_of_budget)) {
        PyErr_Clear();
        return 2;
    }
    return -1;
}

/* One partition's first turn: 1 linearized, 0 not (paused or refuted), 2 out of budget
 * (cleared), -1 error. */
static int first_turn(Search *S, long long turn, long long check_every, PyObject *check,
                      PyObject *out_of_budget, double deadline) {
    long long next_check = check_every;
    int rc = call_check(check, out_of_budget, deadline);
    if (rc)
        return rc;
    for (;;) {
        PyObject *limit = PyLong_FromLongLong(turn < next_check ? turn : next_check);
        if (!limit)
            return -1;
        PyObject *status = Search_run(S, limit);
        Py_DECREF(limit);
        if (!status)
            return -1;
        Py_DECREF(status);
        if (S->status != RUNNING)
            return S->status == LINEARIZED;
        if (S->steps >= next_check) {
            next_check += check_every;
            rc = call_check(check, out_of_budget, deadline);
            if (rc)
                return rc;
        }
        if (S->steps >= turn)
            return 0;
    }
}

/* One partition's first turn, as first_turns runs it: 1 linearized (t holds the ids and
 * state, new references, the steps and seconds), 0 not (paused or refuted) or 2 out of
 * budget (t.seconds set), -1 error. */
typedef struct {
    PyObject *ids, *state;
    long long steps;
    double seconds;
} Turn;

static int turn_of(int code, PyObject *ops, PyObject *search, PyObject *values, long long turn,
                   long long check_every, PyObject *check, PyObject *out_of_budget,
                   double deadline, Turn *t) {
    if (!PyList_Check(ops) || !Py_IS_TYPE(search, &SearchType) || !PyList_Check(values)) {
        PyErr_SetString(PyExc_TypeError, "first_turns: parts are (ops, search, values, ...)");
        return -1;
    }
    Search *S = (Search *)search;
    double started = monotonic_seconds();
    int rc = first_turn(S, turn, check_every, check, out_of_budget, deadline);
    if (rc != 1) {
        t->seconds = monotonic_seconds() - started;
        return rc;
    }
    PyObject *ids = PyTuple_New(S->depth), *state;
    if (!ids)
        return -1;
    for (Py_ssize_t k = 0; k < S->depth; k++) {
        int32_t i = S->st_op[k];
        if (i < 0 || i >= PyList_GET_SIZE(ops)) {
            Py_DECREF(ids);
            PyErr_SetString(PyExc_IndexError, "first_turns: the search and ops differ");
            return -1;
        }
        PyObject *id = S->op_id ? PyLong_FromLongLong(S->op_id[i])
                                : PyObject_GetAttr(PyList_GET_ITEM(ops, i), S_id);
        if (!id) {
            Py_DECREF(ids);
            return -1;
        }
        PyTuple_SET_ITEM(ids, k, id);
    }
    if (S->depth) {
        int32_t last = S->st_op[S->depth - 1];
        state = stepped_state(code, PyList_GET_ITEM(ops, last), values, S->st_state[S->depth - 1]);
    } else {
        state = Py_NewRef(PyList_GET_SIZE(values) ? PyList_GET_ITEM(values, 0) : Py_None);
    }
    if (!state) {
        Py_DECREF(ids);
        return -1;
    }
    t->ids = ids;
    t->state = state;
    t->steps = S->steps;
    t->seconds = monotonic_seconds() - started;
    return 1;
}

typedef struct {
    Py_ssize_t infos, n, index;
} TurnKey;

/* The first turns of `parts` (each a tuple whose (ops, search, values) start at position
 * `at`), in the order `order` gives (NULL: as listed), while each linearizes: each
 * appended to `done` as (ids, state, steps, seconds). Returns how many linearized, or -1
 * with an error; at the first not linearized, *seconds is its turn's and *out whether
 * the budget ran out. */
static Py_ssize_t turns_while_linearized(int code, PyObject *parts, const TurnKey *order,
                                         Py_ssize_t at, long long turn, long long check_every,
                                         PyObject *check, PyObject *out_of_budget,
                                         double deadline, PyObject *done, double *seconds,
                                         int *out) {
    Py_ssize_t nparts = PyList_GET_SIZE(parts), p = 0;
    for (; p < nparts; p++) {
        PyObject *part = PyList_GET_ITEM(parts, order ? order[p].index : p);
        if (!PyTuple_Check(part) || PyTuple_GET_SIZE(part) < at + 3) {
            PyErr_SetString(PyExc_TypeError, "first_turns: parts are (ops, search, values, ...)");
            return -1;
        }
        Turn t = {0};
        int rc = turn_of(code, PyTuple_GET_ITEM(part, at), PyTuple_GET_ITEM(part, at + 1),
                         PyTuple_GET_ITEM(part, at + 2), turn, check_every, check, out_of_budget,
                         deadline, &t);
        if (rc < 0)
            return -1;
        if (rc != 1) {
            *seconds = t.seconds;
            *out = rc == 2;
            break;
        }
        PyObject *entry = Py_BuildValue("(NNLd)", t.ids, t.state, t.steps, t.seconds);
        if (!entry || PyList_Append(done, entry) < 0) {
            Py_XDECREF(entry);
            return -1;
        }
        Py_DECREF(entry);
    }
    return p;
}

static PyObject *wgl_first_turns(PyObject *self, PyObject *args) {
    int code;
    PyObject *parts, *check, *out_of_budget;
    long long turn, check_every;
    double deadline;
    if (!PyArg_ParseTuple(args, "iO!LLOOd", &code, &PyList_Type, &parts, &turn, &check_every,
                          &check, &out_of_budget, &deadline))
        return NULL;
    if (turn <= 0 || check_every <= 0) {
        PyErr_SetString(PyExc_ValueError, "first_turns: turn and check_every must be > 0");
        return NULL;
    }
    PyObject *done = PyList_New(0);
    if (!done)
        return NULL;
    double seconds = 0.0;
    int out = 0;
    if (turns_while_linearized(code, parts, NULL, 0, turn, check_every, check, out_of_budget,
                               deadline, done, &seconds, &out) < 0)
        goto fail;
    return Py_BuildValue("(Ndi)", done, seconds, out);
fail:
    Py_DECREF(done);
    return NULL;
}

/* ---- The fused check: the fused pass and the first turns in one call -------------
 *
 * check_fused(code, operations, op_type, no_key, init, seed, turn, check_every, check,
 *             out_of_budget, deadline, result_type, fields, true)
 *   -> None: the fused pass does not take the history (fuse returned None);
 *   -> (dropped, count, results): every partition's first turn linearized it. results is a
 *      tuple, in key order, of `result_type` instances (a frozen dataclass, made as
 *      object.__new__ and object.__setattr__ make it, so equal to its constructor's) with
 *      the nine `fields` set to: the partition's name (its key; None for a register
 *      history's one unkeyed partition), `true`, its operations, the linearization's ids,
 *      the state, None, "", the steps and the seconds, as first_turns gives them;
 *   -> (dropped, count, parts, order, done, seconds, out) otherwise: parts as fuse gives
 *      them, sorted by key, order the turns' order (fewest info operations, then fewest
 *      operations, first; ties by key), and done, seconds and out as first_turns gives
 *      them for the partitions in that order.
 * What compiled_search.compiled_fuse and compiled_first_turns do, with no Python step
 * between them: a check of a clean history touches no Python code per partition. */

static int turn_key_cmp(const void *x, const void *y) {
    const TurnKey *p = x, *q = y;
    if (p->infos != q->infos)
        return p->infos < q->infos ? -1 : 1;
    if (p->n != q->n)
        return p->n < q->n ? -1 : 1;
    return p->index < q->index ? -1 : (p->index > q->index);
}

static PyObject *assemble(PyTypeObject *type, PyObject *fields, PyObject *const *values) {
    PyObject *none = PyTuple_New(0);
    if (!none)
        return NULL;
    PyObject *made = PyBaseObject_Type.tp_new(type, none, NULL);
    Py_DECREF(none);
    if (!made)
        return NULL;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(fields); k++) {
        if (PyObject_GenericSetAttr(made, PyTuple_GET_ITEM(fields, k), values[k]) < 0) {
            Py_DECREF(made);
            return NULL;
        }
    }
    return made;
}

static PyObject *wgl_check_fused(PyObject *self, PyObject *args) {
    int code;
    PyObject *operations, *no_key, *init, *check, *out_of_budget, *fields, *true_;
    PyTypeObject *op_type, *result_type;
    unsigned long long seed;
    long long turn, check_every;
    double deadline;
    if (!PyArg_ParseTuple(args, "iOO!UOKLLOOdO!O!O", &code, &operations, &PyType_Type, &op_type,
                          &no_key, &init, &seed, &turn, &check_every, &check, &out_of_budget,
                          &deadline, &PyType_Type, &result_type, &PyTuple_Type, &fields, &true_))
        return NULL;
    if (code != CODE_REGISTER && code != CODE_KV) {
        PyErr_Format(PyExc_ValueError, "check_fused: model code %d is not 1 or 2", code);
        return NULL;
    }
    if (turn <= 0 || check_every <= 0 || PyTuple_GET_SIZE(fields) != 9) {
        PyErr_SetString(PyExc_ValueError,
                        "check_fused: turn and check_every must be > 0, and fields nine names");
        return NULL;
    }
    Py_ssize_t dropped = 0;
    PyObject *parts = fuse_parts(code, operations, op_type, no_key, init, seed, &dropped);
    if (!parts || parts == Py_None)
        return parts;
    PyObject *result = NULL, *done = NULL, *order = NULL;
    TurnKey *keys = NULL;
    if (PyList_Sort(parts) < 0) /* by key: keys are distinct, so nothing else is compared */
        goto finish;
    Py_ssize_t nparts = PyList_GET_SIZE(parts), count = 0;
    keys = PyMem_Calloc((size_t)nparts + 1, sizeof(TurnKey));
    if (!keys) {
        PyErr_NoMemory();
        goto finish;
    }
    for (Py_ssize_t p = 0; p < nparts; p++) {
        PyObject *part = PyList_GET_ITEM(parts, p);
        Py_ssize_t n = PyList_GET_SIZE(PyTuple_GET_ITEM(part, 1));
        keys[p] = (TurnKey){PyLong_AsSsize_t(PyTuple_GET_ITEM(part, 4)), n, p};
        count += n;
    }
    qsort(keys, (size_t)nparts, sizeof(TurnKey), turn_key_cmp);
    done = PyList_New(0);
    if (!done)
        goto finish;
    double seconds = 0.0;
    int out = 0;
    Py_ssize_t p = turns_while_linearized(code, parts, keys, 1, turn, check_every, check,
                                          out_of_budget, deadline, done, &seconds, &out);
    if (p < 0)
        goto finish;
    if (p < nparts) { /* the turns loop goes on in Python */
        order = PyList_New(nparts);
        if (!order)
            goto finish;
        for (Py_ssize_t k = 0; k < nparts; k++) {
            PyObject *index = PyLong_FromSsize_t(keys[k].index);
            if (!index)
                goto finish;
            PyList_SET_ITEM(order, k, index);
        }
        result = Py_BuildValue("(nnOOOdi)", dropped, count, parts, order, done, seconds, out);
        goto finish;
    }
    PyObject *results = PyTuple_New(nparts);
    if (!results)
        goto finish;
    int unkeyed = code == CODE_REGISTER && nparts == 1 &&
                  PyUnicode_GET_LENGTH(PyTuple_GET_ITEM(PyList_GET_ITEM(parts, 0), 0)) == 0;
    for (Py_ssize_t k = 0; k < nparts; k++) {
        PyObject *part = PyList_GET_ITEM(parts, keys[k].index);
        PyObject *entry = PyList_GET_ITEM(done, k);
        PyObject *operations_n = PyLong_FromSsize_t(keys[k].n);
        if (!operations_n) {
            Py_DECREF(results);
            goto finish;
        }
        PyObject *values[9] = {unkeyed ? Py_None : PyTuple_GET_ITEM(part, 0),
                               true_,
                               operations_n,
                               PyTuple_GET_ITEM(entry, 0),
                               PyTuple_GET_ITEM(entry, 1),
                               Py_None,
                               S_empty,
                               PyTuple_GET_ITEM(entry, 2),
                               PyTuple_GET_ITEM(entry, 3)};
        PyObject *made = assemble(result_type, fields, values);
        Py_DECREF(operations_n);
        if (!made) {
            Py_DECREF(results);
            goto finish;
        }
        PyTuple_SET_ITEM(results, keys[k].index, made);
    }
    result = Py_BuildValue("(nnN)", dropped, count, results);
finish:
    PyMem_Free(keys);
    Py_XDECREF(order);
    Py_XDECREF(done);
    Py_DECREF(parts);
    return result;
}

/* getenv(name) -> the process environment's value, or None. The C library's table,
 * which os.environ's assignments and deletions update (putenv, unsetenv): the choice of
 * core is read on every check, and os.environ.get costs 10-20 us there when the caches
 * are cold (docs/benchmarks.md, Session 16: the fixed cost per check). */
static PyObject *wgl_getenv(PyObject *self, PyObject *name) {
    if (!PyUnicode_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "getenv: the name must be a str");
        return NULL;
    }
    const char *text = PyUnicode_AsUTF8(name);
    if (!text)
        return NULL;
    const char *value = getenv(text);
    if (!value)
        Py_RETURN_NONE;
    return PyUnicode_DecodeFSDefault(value);
}

static PyMethodDef wgl_functions[] = {
    {"getenv", wgl_getenv, METH_O, "getenv(name) -> the environment's value of name, or None"},
    {"prepare", wgl_prepare, METH_VARARGS,
     "prepare(code, operations, prepared_type, tail, no_key, fallback) -> (list, dropped)"},
    {"flatten", wgl_flatten, METH_VARARGS,
     "flatten(code, items, init) -> (kinds, a, b, is_ok, calls, rets, values, ids) or None"},
    {"fuse", wgl_fuse, METH_VARARGS,
     "fuse(code, operations, op_type, no_key, init, seed) -> (dropped, [(key, ops, search, "
     "values, infos), ...]) or None"},
    {"check_fused", wgl_check_fused, METH_VARARGS,
     "check_fused(code, operations, op_type, no_key, init, seed, turn, check_every, check, "
     "out_of_budget, deadline, result_type, fields, true) -> None, (dropped, count, results) "
     "or (dropped, count, parts, order, done, seconds, out)"},
    {"first_turns", wgl_first_turns, METH_VARARGS,
     "first_turns(code, parts, turn, check_every, check, out_of_budget, deadline) -> (done, "
     "seconds, out)"},
    {"group", wgl_group, METH_O, "group(items) -> {payload[0]: [item, ...]}"},
    {"infos", wgl_infos, METH_O, "infos(items) -> how many operations are not ok"},
    {"op_ids", wgl_op_ids, METH_VARARGS, "op_ids(items, order) -> (items[i].op.id, ...)"},
    {NULL}};

static struct PyModuleDef wgl_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_wgl",
    .m_doc = "The compiled search core (checker/_wgl.c).",
    .m_size = -1,
    .m_methods = wgl_functions,
};

PyMODINIT_FUNC PyInit__wgl(void) {
    if (PyType_Ready(&SearchType) < 0 || PyType_Ready(&AppenderType) < 0 || intern_names() < 0)
        return NULL;
    PyObject *m = PyModule_Create(&wgl_module);
    if (!m)
        return NULL;
    Py_INCREF(&SearchType);
    if (PyModule_AddObject(m, "Search", (PyObject *)&SearchType) < 0) {
        Py_DECREF(&SearchType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&AppenderType);
    if (PyModule_AddObject(m, "Appender", (PyObject *)&AppenderType) < 0) {
        Py_DECREF(&AppenderType);
        Py_DECREF(m);
        return NULL;
    }
#ifdef WGL_INLINE_VALUES
    PyModule_AddIntConstant(m, "INLINE_VALUES", 1); /* op_attr can read values directly */
#else
    PyModule_AddIntConstant(m, "INLINE_VALUES", 0);
#endif
    PyModule_AddIntConstant(m, "READ", K_READ);
    PyModule_AddIntConstant(m, "SET", K_SET);
    PyModule_AddIntConstant(m, "CAS", K_CAS);
    PyModule_AddIntConstant(m, "TRANSFORM", K_TRANSFORM);
    return m;
}
