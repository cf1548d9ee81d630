"""Every error the package raises on purpose crosses a process boundary whole (worker pools, Ray)."""

import pickle

import pytest

from remat_core.errors import (BudgetError, GraphError, InfeasibleBudget, InvalidSchedule, OnnxImportError, RematError,
                               TraceError, UnknownSolver)

ERRORS = [InvalidSchedule(3, ("compute", "f2"), "input f1 is not resident"),
          InvalidSchedule(9, None, "output b1 never computed"),
          InfeasibleBudget(100, 150, solver="rotor", detail="below the chain's smallest plan"),
          InfeasibleBudget(100),
          TraceError("resnet18", "data-dependent shape", op="aten.nonzero.default", module="layer1", hint="use x"),
          OnnxImportError("model.onnx", "unsupported op", op="Loop"),
          GraphError("node 'a' has mem -1"), BudgetError("bad budget"), UnknownSolver("nope")]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_an_error_pickles_with_its_message_and_fields(error):
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error) and isinstance(back, RematError)
    assert str(back) == str(error)
    assert vars(back) == vars(error)
