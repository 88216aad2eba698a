"""A tiny copy of QM9's canonical release (gdb9.sdf, gdb9.sdf.csv, uncharacterized.txt) in
the release's formats: methane, ammonia, water, acetylene, HCN and formaldehyde (gdb_1..6,
their QM9 geometries rounded as the SDF rounds them), gdb_3 marked uncharacterised so the
loader must drop it, and one made-up record with an aromatic (type 4) bond."""

from __future__ import annotations

from pathlib import Path

# (symbol, x, y, z) per atom, (first, second, V2000 type) per bond (1-based), as in gdb9.sdf.
MOLECULES = {
    "gdb_1": (
        [("C", -0.0127, 1.0858, 0.0080), ("H", 0.0022, -0.0060, 0.0020),
         ("H", 1.0117, 1.4638, 0.0003), ("H", -0.5408, 1.4475, -0.8766),
         ("H", -0.5238, 1.4379, 0.9064)],
        [(1, 2, 1), (1, 3, 1), (1, 4, 1), (1, 5, 1)],
    ),
    "gdb_2": (
        [("N", -0.0404, 1.0241, 0.0626), ("H", 0.0173, 0.0125, -0.0274),
         ("H", 0.9158, 1.3587, -0.0288), ("H", -0.5203, 1.3435, -0.7755)],
        [(1, 2, 1), (1, 3, 1), (1, 4, 1)],
    ),
    "gdb_3": (
        [("O", -0.0344, 0.9775, 0.0076), ("H", 0.0647, 0.0206, 0.0015),
         ("H", 0.8717, 1.3008, 0.0007)],
        [(1, 2, 1), (1, 3, 1)],
    ),
    "gdb_4": (
        [("C", 0.5995, 0.0000, 1.0000), ("C", -0.5995, 0.0000, 1.0000),
         ("H", -1.6616, 0.0000, 1.0000), ("H", 1.6616, 0.0000, 1.0000)],
        [(1, 2, 3), (1, 4, 1), (2, 3, 1)],
    ),
    "gdb_5": (
        [("C", -0.0133, 1.1325, 0.0083), ("N", 0.0023, -0.0192, 0.0019),
         ("H", -0.0278, 2.1989, 0.0146)],
        [(1, 2, 3), (1, 3, 1)],
    ),
    "gdb_6": (
        [("C", -0.0089, 1.1536, 0.0058), ("O", 0.0083, -0.0303, 0.0015),
         ("H", 0.9416, 1.7355, 0.0005), ("H", -0.9668, 1.7082, 0.0112)],
        [(1, 2, 2), (1, 3, 1), (1, 4, 1)],
    ),
    "aromatic_pair": (
        [("C", 0.0, 0.0, 0.0), ("C", 1.39, 0.0, 0.0)],
        [(1, 2, 4)],
    ),
}  # fmt: skip

# MoleculeNet's gdb9.sdf.csv rows (A, B, C, mu, alpha, homo, lumo, gap, r2, zpve, u0, u298,
# h298, g298, cv, u0_atom, u298_atom, h298_atom, g298_atom) for gdb_1..6; the last row is
# made up.
TARGETS = [
    "157.7118,157.70997,157.70699,0.0,13.21,-0.3877,0.1171,0.5048,35.3641,0.044749,-40.47893,"
    "-40.476062,-40.475117,-40.498597,6.469,-395.999594594,-398.64329012,-401.014646522,"
    "-372.471772148",
    "293.60975,293.54111,191.39397,1.6256,9.46,-0.257,0.0829,0.3399,26.1563,0.034358,"
    "-56.525887,-56.523026,-56.522082,-56.544961,6.316,-276.861363363,-278.620271231,"
    "-280.399259105,-259.338802046",
    "799.58812,437.90386,282.94545,1.8511,6.31,-0.2928,0.0687,0.3615,19.0002,0.021375,"
    "-76.404702,-76.401867,-76.400922,-76.422349,6.002,-213.087623556,-213.974293519,"
    "-215.159658452,-201.407171158",
    "0.0,35.6100361,35.6100361,0.0,16.28,-0.2845,0.0506,0.3351,59.5248,0.026841,-77.308427,"
    "-77.305527,-77.304583,-77.327429,8.574,-385.501997007,-387.237686164,-389.016047571,"
    "-365.800724469",
    "0.0,44.593883,44.593883,2.8937,12.99,-0.3604,0.0191,0.3796,48.7476,0.016601,-93.411888,"
    "-93.40937,-93.408425,-93.431246,6.278,-301.820533759,-302.906752184,-304.091488592,"
    "-288.720028197",
    "285.48839,38.9823,34.29892,2.1089,14.18,-0.267,-0.0406,0.2263,59.9891,0.026603,"
    "-114.483613,-114.480746,-114.479802,-114.505268,6.413,-358.756935444,-360.512706096,"
    "-362.291066103,-340.464421391",
    ",".join(["1.0"] * 19),
]
UNCHARACTERIZED = [3]  # 1-based, like the release's file


def _record(name: str, atoms, bonds) -> str:
    lines = [name, "  -OEChem-03231823253D", "", f"{len(atoms):>3}{len(bonds):>3}  0     0  0"
             "  0  0  0  0999 V2000"]  # fmt: skip
    for symbol, x, y, z in atoms:
        lines.append(
            f"{x:>10.4f}{y:>10.4f}{z:>10.4f} {symbol:<3} 0  0  0  0  0  0  0  0  0  0  0  0"
        )
    for first, second, kind in bonds:
        lines.append(f"{first:>3}{second:>3}{kind:>3}  0  0  0  0")
    lines += ["M  END", "$$$$"]
    return "\n".join(lines)


def write_canonical(folder: Path) -> Path:
    """Writes the three raw files into `folder` and returns it."""
    folder.mkdir(parents=True, exist_ok=True)
    sdf = "\n".join(_record(name, *molecule) for name, molecule in MOLECULES.items())
    (folder / "gdb9.sdf").write_text(sdf + "\n")
    header = "mol_id,A,B,C,mu,alpha,homo,lumo,gap,r2,zpve,u0,u298,h298,g298,cv,u0_atom," \
        "u298_atom,h298_atom,g298_atom"  # fmt: skip
    rows = [f"{name},{values}" for name, values in zip(MOLECULES, TARGETS)]
    (folder / "gdb9.sdf.csv").write_text("\n".join([header, *rows]) + "\n")
    head = [f" header line {i}" for i in range(9)]
    body = [f"  {index:>6}  C  (uncharacterised)" for index in UNCHARACTERIZED]
    (folder / "uncharacterized.txt").write_text("\n".join(head + body + [" footer"]) + "\n")
    return folder
