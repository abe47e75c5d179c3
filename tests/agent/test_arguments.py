from toolmesh.agent.arguments import Argument, check_arguments

DECLARED = (Argument(name="city", type="string"), Argument(name="days", type="integer"),
            Argument(name="metric", type="boolean", required=False),
            Argument(name="scale", type="number", required=False))


def test_valid_arguments_pass() -> None:
    assert check_arguments({"city": "Paris", "days": 3}, DECLARED) == []
    assert check_arguments({"city": "Paris", "days": 3.0, "scale": 2, "metric": True}, DECLARED) == []


def test_every_problem_is_reported() -> None:
    problems = check_arguments({"days": "3", "metric": 1, "colour": "red", "scale": True}, DECLARED)
    assert problems == [
        "missing required argument 'city' (string)",
        "argument 'days' must be integer, not string",
        "argument 'metric' must be boolean, not integer",
        "unknown argument 'colour' (arguments: 'city', 'days', 'metric', 'scale')",
        "argument 'scale' must be number, not boolean",
    ]


def test_args_must_be_an_object() -> None:
    assert check_arguments(["Paris"], DECLARED) == ["Args must be a JSON object, not array"]


def test_a_tool_without_arguments_takes_none() -> None:
    assert check_arguments({}, ()) == []
    assert check_arguments({"x": 1}, ()) == ["unknown argument 'x' (arguments: none)"]
