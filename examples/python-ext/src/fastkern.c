/* Python binding: fastkern.run(size, rounds) -> checksum. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

void kern_fill(uint16_t *image, size_t n, uint32_t seed);
void kern_equalise(uint16_t *image, size_t n);
uint64_t kern_checksum(const uint16_t *image, size_t n);

static PyObject *run(PyObject *self, PyObject *args) {
    Py_ssize_t size, rounds;
    if (!PyArg_ParseTuple(args, "nn", &size, &rounds) || size <= 0 || rounds < 0)
        return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_ValueError, "bad size");
    uint16_t *image = malloc(sizeof *image * (size_t)size);
    if (!image)
        return PyErr_NoMemory();
    uint64_t total = 0;
    for (Py_ssize_t r = 0; r < rounds; r++) {
        kern_fill(image, (size_t)size, (uint32_t)r);
        kern_equalise(image, (size_t)size);
        total += kern_checksum(image, (size_t)size);
    }
    free(image);
    return PyLong_FromUnsignedLongLong(total);
}

static PyMethodDef methods[] = {
    {"run", run, METH_VARARGS, "run(size, rounds) -> checksum"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastkern", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fastkern(void) { return PyModule_Create(&module); }
