"""Runs mpi4py's own test suite (the `test/` folder of its sdist) under Baton.

Usage (under mpiexec): python mpi4py_suite.py TESTDIR EXCLUDED_LIST [main.py options]

The exclusion list holds one entry a line; `#` starts a comment, which says why. An entry
without a dot is a whole test module (`test_win`: not even imported); any other is a test name
pattern: a substring of `module.Class.method`, where `*` stands for any characters.
Each rank prints one line that the CI script reads:
`mpi4py-suite rank R of N: run X, skipped Y, excluded Z (and M modules), failures F, errors E`
(excluded: tests that the list kept from loading, not counted in run).

mpi4py skips a family (sessions, files) when its functions are missing from the library, which
it learns from a probe at module load (`except NotImplementedError`). Baton has the functions
and answers MPI_ERR_UNSUPPORTED_OPERATION, the standard's error for this, which the probe does
not catch, so the whole module would fail to load. While a test module loads, and only for
those probes (`Session.Init`, `File.Open`), that error becomes NotImplementedError: mpi4py then
skips those classes as it does for an MPI without the family, and the module's other tests run.
"""

import contextlib
import fnmatch
import sys
import unittest


def read_list(path):
    modules, patterns = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            entry = line.split("#", 1)[0].strip()
            if not entry:
                continue
            if "." not in entry and "*" not in entry:
                modules.append(entry)
            else:
                patterns.append(f"*{entry}*")
    return modules, patterns


@contextlib.contextmanager
def unsupported_as_unavailable():
    from mpi4py import MPI

    def unavailable(cls, name):
        def call(klass, *args, **kwargs):
            try:
                return getattr(super(shim, klass), name)(*args, **kwargs)
            except MPI.Exception as e:
                if e.Get_error_class() == MPI.ERR_UNSUPPORTED_OPERATION:
                    raise NotImplementedError(str(e)) from e
                raise

        shim = type(cls.__name__, (cls,), {name: classmethod(call), "__module__": cls.__module__})
        return shim

    saved = MPI.Session, MPI.File
    MPI.Session = unavailable(MPI.Session, "Init")
    MPI.File = unavailable(MPI.File, "Open")
    try:
        yield
    finally:
        MPI.Session, MPI.File = saved


def main():
    testdir, listfile = sys.argv[1], sys.argv[2]
    sys.argv = [f"{testdir}/main.py"] + sys.argv[3:]
    sys.path.insert(0, testdir)
    sys.dont_write_bytecode = True
    import main as mpi4py_main  # the sdist's runner

    modules, patterns = read_list(listfile)
    for m in modules:
        sys.argv += ["-e", f"^{m}\\.py$"]
    excluded = set()

    class Loader(mpi4py_main.TestLoader):
        def _get_module_from_name(self, name):  # discovery
            with unsupported_as_unavailable():
                return super()._get_module_from_name(name)

        def loadTestsFromName(self, name, module=None):  # tests named on the command line
            with unsupported_as_unavailable():
                return super().loadTestsFromName(name, module)

        def getTestCaseNames(self, testCaseClass):
            names = unittest.TestLoader.getTestCaseNames(self, testCaseClass)
            kept = []
            for name in names:
                full = f"{testCaseClass.__module__}.{testCaseClass.__qualname__}.{name}"
                if any(fnmatch.fnmatchcase(full, p) for p in patterns):
                    excluded.add(full)
                else:
                    kept.append(name)
            return kept

    mpi4py_main.TestLoader = Loader

    class Program(mpi4py_main.TestProgram):
        def runTests(self):
            try:
                super().runTests()
            finally:
                from mpi4py import MPI

                r = self.result
                comm = MPI.COMM_WORLD
                line = (
                    f"mpi4py-suite rank {comm.Get_rank()} of {comm.Get_size()}: "
                    f"run {r.testsRun}, skipped {len(r.skipped)}, excluded {len(excluded)} (and {len(modules)} modules), "
                    f"failures {len(r.failures)}, errors {len(r.errors)}"
                )
                print(line, file=sys.stderr, flush=True)

    Program(module=None)


if __name__ == "__main__":
    main()
