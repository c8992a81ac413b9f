/* The history reader's loop over plainly valid lines, in C (checker/history.py,
 * `_parse_lines`): each line decoded by orjson, checked as `_plainly_valid` checks it,
 * made its HistoryEvent (the decoded object as the event's fields), and paired with
 * `build_history`'s rules, filling `_Pairing`'s flat fields as the Python loop does.
 *
 * It reads only the common case: a file every line of which orjson decodes to a plainly
 * valid object, in an order that breaks no rule. At the first line that is anything
 * else (a blank line, one its decoder refuses, a schema_version, a field of another type, an
 * index or time beyond 64 bits, a broken order) it builds nothing and returns None, and
 * the Python loop reads the whole text, so its events, operations and errors are the
 * Python loop's (`assemble` makes the operations as `_assembled_history`'s loop does).
 * tests/checker/test_checker_read_compiled.py holds the two to the same
 * History on every shape and error the reader tests use.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define SLOT 11 /* values per operation in `_Pairing.fields` */

static PyObject *s_index, *s_time, *s_process, *s_type, *s_f, *s_user, *s_value, *s_error,
    *s_line, *s_dict, *s_empty;

/* Whether every key of `obj` is in `keys` (-1: error). */
static int keys_within(PyObject *obj, PyObject *keys) {
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(obj, &pos, &key, &value)) {
        int found = PySet_Contains(keys, key);
        if (found <= 0) return found;
    }
    return 1;
}

/* A non-negative int that fits in 64 bits, into *out: 1; 0 when it is not; -1: error. */
static int small_count(PyObject *value, long long *out) {
    if (value == NULL || !PyLong_CheckExact(value)) return 0;
    int overflow = 0;
    long long got = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (got == -1 && PyErr_Occurred()) return -1;
    if (overflow != 0 || got < 0) return 0;
    *out = got;
    return 1;
}

static int set_missing(PyObject *obj, PyObject *key) {
    int has = PyDict_Contains(obj, key);
    if (has != 0) return has < 0 ? -1 : 0;
    return PyDict_SetItem(obj, key, Py_None);
}

/* Whether the line holds a run of `longest` digits (as `long_digit_run` tells of its UTF-8
 * bytes), or cannot be looked at here: 1; 0 when it holds none. */
static int long_digit_run(PyObject *raw, Py_ssize_t longest) {
    const char *text;
    Py_ssize_t size;
    if (PyBytes_CheckExact(raw)) {
        text = PyBytes_AS_STRING(raw);
        size = PyBytes_GET_SIZE(raw);
    } else if (PyUnicode_CheckExact(raw)) {
        text = PyUnicode_AsUTF8AndSize(raw, &size);
        if (text == NULL) { /* a lone surrogate: the Python loop decides */
            PyErr_Clear();
            return 1;
        }
    } else {
        return 1;
    }
    Py_ssize_t run = 0;
    for (Py_ssize_t i = 0; i < size; i++) {
        if (text[i] >= '0' && text[i] <= '9') {
            if (++run >= longest) return 1;
        } else {
            run = 0;
        }
    }
    return 0;
}

/* read_plain(lines, loads, exact_loads, plain_keys, event_types, event_class, long_digits)
 *   -> (events, fields, open_ops, watch, count), or None (not plain: read in Python).
 *   A line with a run of long_digits digits is decoded by exact_loads (the stdlib's,
 *   which keeps big integers exact), any other by loads (orjson), as the Python loop
 *   decodes them. */
static PyObject *read_plain(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *lines, *loads, *exact_loads, *plain_keys, *event_types, *event_class;
    Py_ssize_t long_digits;
    if (!PyArg_ParseTuple(args, "O!OOO!O!O!n", &PyList_Type, &lines, &loads, &exact_loads,
                          &PyFrozenSet_Type, &plain_keys, &PyFrozenSet_Type, &event_types,
                          &PyType_Type, &event_class, &long_digits))
        return NULL;
    PyObject *events = PyList_New(0), *fields = PyList_New(0), *open_ops = PyDict_New(),
             *crashed = PySet_New(NULL), *watch = PyList_New(0);
    PyObject *obj = NULL, *event = NULL, *result = NULL;
    if (!events || !fields || !open_ops || !crashed || !watch) goto done;
    long long last_index = -1, last_time = -1;
    Py_ssize_t count = 0;
    Py_ssize_t n = PyList_GET_SIZE(lines);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *raw = PyList_GET_ITEM(lines, i);
        obj = PyObject_CallOneArg(long_digit_run(raw, long_digits) ? exact_loads : loads, raw);
        if (obj == NULL) {
            if (PyErr_ExceptionMatches(PyExc_ValueError)) { /* blank, or not for orjson */
                PyErr_Clear();
                goto plain_no_more;
            }
            goto done;
        }
        if (!PyDict_CheckExact(obj)) goto plain_no_more;
        int within = keys_within(obj, plain_keys);
        if (within < 0) goto done;
        if (!within) goto plain_no_more;
        /* `_plainly_valid`, as the Python loop checks it inline */
        long long index, time;
        PyObject *index_obj = PyDict_GetItemWithError(obj, s_index);
        int got = small_count(index_obj, &index);
        if (got <= 0) goto got_no_count;
        PyObject *time_obj = PyDict_GetItemWithError(obj, s_time);
        got = small_count(time_obj, &time);
        if (got <= 0) goto got_no_count;
        PyObject *process = PyDict_GetItemWithError(obj, s_process);
        PyObject *kind = PyDict_GetItemWithError(obj, s_type);
        PyObject *f = PyDict_GetItemWithError(obj, s_f);
        PyObject *user = PyDict_GetItemWithError(obj, s_user);
        if (PyErr_Occurred()) goto done;
        if (process == NULL || !(PyLong_CheckExact(process) || PyUnicode_CheckExact(process)))
            goto plain_no_more;
        if (kind == NULL || !PyUnicode_CheckExact(kind)) goto plain_no_more;
        int known = PySet_Contains(event_types, kind);
        if (known < 0) goto done;
        if (!known) goto plain_no_more;
        if (f == NULL || !PyUnicode_CheckExact(f) || PyUnicode_GET_LENGTH(f) == 0)
            goto plain_no_more;
        if (user != NULL && !PyUnicode_CheckExact(user)) goto plain_no_more;
        /* The decoded object is the event's fields: line, then the defaults. */
        PyObject *number = PyLong_FromSsize_t(i + 1);
        if (number == NULL) goto done;
        int failed = PyDict_SetItem(obj, s_line, number);
        Py_DECREF(number);
        if (failed || set_missing(obj, s_value) || set_missing(obj, s_error) ||
            set_missing(obj, s_user))
            goto done;
        event = PyBaseObject_Type.tp_new((PyTypeObject *)event_class, s_empty, NULL);
        if (event == NULL || PyObject_GenericSetAttr(event, s_dict, obj) < 0) goto done;
        Py_ssize_t position = PyList_GET_SIZE(events);
        if (PyList_Append(events, event) < 0) goto done;
        /* build_history's rules, in its order */
        if (index <= last_index || time < last_time) goto plain_no_more;
        last_index = index;
        last_time = time;
        if (PyUnicode_CompareWithASCIIString(kind, "invoke") == 0) {
            int open = PyDict_Contains(open_ops, process);
            if (open < 0) goto done;
            int gone = open ? 1 : PySet_Contains(crashed, process);
            if (gone < 0) goto done;
            if (gone) goto plain_no_more;
            PyObject *begun = Py_BuildValue("(nOnO)", position, f, count, event);
            if (begun == NULL) goto done;
            failed = PyDict_SetItem(open_ops, process, begun);
            Py_DECREF(begun);
            if (failed) goto done;
            PyObject *at = PyLong_FromSsize_t(position);
            if (at == NULL) goto done;
            /* (None, start, None, invoke, None, ...): never completed, until it is */
            PyObject *slot[SLOT] = {Py_None, at,      Py_None, event,   Py_None, Py_None,
                                    Py_None, Py_None, Py_None, Py_None, Py_None};
            for (int k = 0; k < SLOT && !failed; k++) failed = PyList_Append(fields, slot[k]);
            Py_DECREF(at);
            if (failed) goto done;
            count++;
            Py_CLEAR(event);
            Py_CLEAR(obj);
            continue;
        }
        if (PyUnicode_CompareWithASCIIString(kind, "watch") == 0) {
            if (PyList_Append(watch, event) < 0) goto done;
            Py_CLEAR(event);
            Py_CLEAR(obj);
            continue;
        }
        PyObject *begun = PyDict_GetItemWithError(open_ops, process);
        if (begun == NULL) {
            if (PyErr_Occurred()) goto done;
            goto plain_no_more;
        }
        Py_INCREF(begun);
        int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(begun, 1), f, Py_EQ);
        if (same <= 0 || PyDict_DelItem(open_ops, process) < 0) {
            Py_DECREF(begun);
            if (same < 0 || PyErr_Occurred()) goto done;
            goto plain_no_more;
        }
        Py_ssize_t op_id = PyLong_AsSsize_t(PyTuple_GET_ITEM(begun, 2));
        PyObject *start = PyTuple_GET_ITEM(begun, 0), *invoke = PyTuple_GET_ITEM(begun, 3);
        Py_ssize_t base = op_id * SLOT;
        if (PyUnicode_CompareWithASCIIString(kind, "ok") == 0) {
            /* its fields, in the constructor's order (but id and type) */
            PyObject *values[SLOT];
            values[0] = PyObject_GetAttr(invoke, s_process);
            values[1] = Py_NewRef(f);
            values[2] = PyObject_GetAttr(invoke, s_value);
            values[3] = Py_XNewRef(PyDict_GetItemWithError(obj, s_value));
            values[4] = Py_NewRef(start);
            values[5] = PyLong_FromSsize_t(position);
            values[6] = PyObject_GetAttr(invoke, s_time);
            values[7] = Py_NewRef(time_obj);
            values[8] = PyObject_GetAttr(invoke, s_index);
            values[9] = Py_NewRef(index_obj);
            values[10] = PyObject_GetAttr(invoke, s_user);
            Py_DECREF(begun);
            int ok = 1;
            for (int k = 0; k < SLOT; k++) ok = ok && values[k] != NULL;
            for (int k = 0; k < SLOT; k++) {
                if (!ok) {
                    Py_XDECREF(values[k]);
                } else if (PyList_SetItem(fields, base + k, values[k]) < 0) { /* steals */
                    ok = 0;
                }
            }
            if (!ok) goto done;
        } else {
            if (PyUnicode_CompareWithASCIIString(kind, "info") == 0 &&
                PySet_Add(crashed, process) < 0) {
                Py_DECREF(begun);
                goto done;
            }
            PyObject *at = PyLong_FromSsize_t(position);
            Py_DECREF(begun);
            if (at == NULL) goto done;
            Py_INCREF(event);
            if (PyList_SetItem(fields, base + 2, at) < 0 ||
                PyList_SetItem(fields, base + 4, event) < 0)
                goto done;
        }
        Py_CLEAR(event);
        Py_CLEAR(obj);
        continue;
    got_no_count:
        if (got < 0) goto done;
    plain_no_more:
        if (PyErr_Occurred()) goto done;
        Py_INCREF(Py_None);
        result = Py_None;
        goto done;
    }
    result = Py_BuildValue("(OOOOn)", events, fields, open_ops, watch, count);
done:
    Py_XDECREF(obj);
    Py_XDECREF(event);
    Py_XDECREF(events);
    Py_XDECREF(fields);
    Py_XDECREF(open_ops);
    Py_XDECREF(crashed);
    Py_XDECREF(watch);
    return result;
}

static PyObject *s_names[13]; /* Operation's fields, in the constructor's order */
static PyObject *s_ok;

/* assemble(fields, operation_class, operation_of) -> the operations of `_Pairing.fields`
 * (SLOT values each, by id), as `_assembled_history`'s loop makes them: an ok one field
 * by field in the constructor's order (object.__setattr__, so its values stay inline),
 * any other by `operation_of(op_id, invoke, start, complete, end)`. */
static PyObject *assemble(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *fields, *operation_class, *operation_of;
    if (!PyArg_ParseTuple(args, "O!O!O", &PyList_Type, &fields, &PyType_Type, &operation_class,
                          &operation_of))
        return NULL;
    Py_ssize_t total = PyList_GET_SIZE(fields);
    if (total % SLOT != 0) {
        PyErr_SetString(PyExc_ValueError, "fields: not a whole number of operations");
        return NULL;
    }
    Py_ssize_t count = total / SLOT;
    PyObject *operations = PyList_New(count);
    if (operations == NULL) return NULL;
    for (Py_ssize_t op_id = 0; op_id < count; op_id++) {
        PyObject **slot = &PyList_GET_ITEM(fields, op_id * SLOT);
        PyObject *id = PyLong_FromSsize_t(op_id);
        if (id == NULL) goto fail;
        PyObject *made;
        if (slot[0] == Py_None) { /* not ok: None, start, end, invoke, completion */
            made = PyObject_CallFunctionObjArgs(operation_of, id, slot[3], slot[1], slot[4],
                                                slot[2], NULL);
        } else {
            made = PyBaseObject_Type.tp_new((PyTypeObject *)operation_class, s_empty, NULL);
            /* id, process, f, request, "ok", response, call, ret, call_time,
               return_time, invoke_index, complete_index, user */
            PyObject *values[13] = {id,      slot[0], slot[1], slot[2], s_ok,
                                    slot[3], slot[4], slot[5], slot[6], slot[7],
                                    slot[8], slot[9], slot[10]};
            for (int k = 0; k < 13 && made != NULL; k++) {
                if (PyObject_GenericSetAttr(made, s_names[k], values[k]) < 0) Py_CLEAR(made);
            }
        }
        Py_DECREF(id);
        if (made == NULL) goto fail;
        PyList_SET_ITEM(operations, op_id, made); /* steals */
    }
    return operations;
fail:
    Py_DECREF(operations);
    return NULL;
}

static PyMethodDef methods[] = {
    {"read_plain", read_plain, METH_VARARGS,
     "read_plain(lines, loads, exact_loads, plain_keys, event_types, event_class, "
     "long_digits): the events, "
     "fields, open invokes, watch events and operation count of plainly valid lines, "
     "or None."},
    {"assemble", assemble, METH_VARARGS,
     "assemble(fields, operation_class, operation_of): the operations of the fields."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_histread", "The history reader's plain loop in C.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__histread(void) {
    s_index = PyUnicode_InternFromString("index");
    s_time = PyUnicode_InternFromString("time");
    s_process = PyUnicode_InternFromString("process");
    s_type = PyUnicode_InternFromString("type");
    s_f = PyUnicode_InternFromString("f");
    s_user = PyUnicode_InternFromString("user");
    s_value = PyUnicode_InternFromString("value");
    s_error = PyUnicode_InternFromString("error");
    s_line = PyUnicode_InternFromString("line");
    s_dict = PyUnicode_InternFromString("__dict__");
    s_empty = PyTuple_New(0);
    static const char *names[13] = {
        "id",        "process",     "f",           "request",      "type",
        "response",  "call",        "ret",         "call_time",    "return_time",
        "invoke_index", "complete_index", "user"};
    for (int k = 0; k < 13; k++) {
        s_names[k] = PyUnicode_InternFromString(names[k]);
        if (s_names[k] == NULL) return NULL;
    }
    s_ok = PyUnicode_InternFromString("ok");
    if (s_ok == NULL) return NULL;
    if (!s_index || !s_time || !s_process || !s_type || !s_f || !s_user || !s_value ||
        !s_error || !s_line || !s_dict || !s_empty)
        return NULL;
    return PyModule_Create(&module);
}
