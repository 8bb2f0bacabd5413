from kubewasm import generate_name
from kubewasm.names import ALPHABET


def test_appends_five_characters_from_the_alphabet():
    name = generate_name("web-")
    assert len(name) == 9
    assert name.startswith("web-")
    assert all(c in ALPHABET for c in name[4:])
    assert len({generate_name("web-") for _ in range(20)}) > 1


def test_truncates_long_bases():
    assert len(generate_name("a" * 70)) == 63
    long = generate_name("é" * 40)
    assert len(long.encode()) == 58 + 5
    assert long.startswith("é" * 29)
