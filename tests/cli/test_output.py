"""The CLI's written InferenceData: every value read back as written, integers compressed and
floating-point draws not, whichever of ArviZ's data types holds them."""

import numpy as np
import pytest
import xarray as xr

from bnpjax.cli.output import write_idata


def _groups():
    rng = np.random.default_rng(0)
    posterior = xr.Dataset(
        {
            "Z": (("chain", "draw", "row", "feature"), rng.integers(0, 2, (2, 5, 7, 3), np.int8)),
            "sigma": (("chain", "draw"), rng.random((2, 5), np.float32)),
            "active": (("chain", "draw", "feature"), rng.random((2, 5, 3)) < 0.5),
        },
        coords={"chain": [0, 1], "draw": np.arange(5)},
    )
    stats = xr.Dataset({"lp": (("chain", "draw"), rng.normal(size=(2, 5)))})
    return {"posterior": posterior, "sample_stats": stats}


def _check(read, written):
    for name, var in read.data_vars.items():
        np.testing.assert_array_equal(var.values, written[name].values)
        assert var.encoding["zlib"] == (written[name].dtype.kind in "biu"), name


def test_inference_data_written_with_integers_compressed(tmp_path):
    az = pytest.importorskip("arviz")
    if not hasattr(az, "InferenceData"):
        pytest.skip("ArviZ 1.x: no InferenceData type")
    idata = az.InferenceData(**_groups())
    idata.posterior["sigma"].encoding = {"zlib": True}  # the caller's encodings stay theirs
    posterior = idata.posterior
    path = write_idata(idata, tmp_path / "out" / "run.nc")
    back = az.from_netcdf(str(path))
    for name in ("posterior", "sample_stats"):
        _check(back[name], idata[name])
    assert idata.posterior is posterior and idata.posterior["sigma"].encoding == {"zlib": True}


def test_datatree_and_dataset_written_with_integers_compressed(tmp_path):
    groups = _groups()
    write_idata(groups["posterior"], tmp_path / "posterior.nc")
    with xr.open_dataset(tmp_path / "posterior.nc") as back:
        _check(back, groups["posterior"])
    if not hasattr(xr, "DataTree"):
        pytest.skip("this xarray has no DataTree")
    # coordinates on the root, inherited by the groups (written with the root only)
    tree = xr.DataTree.from_dict({"/": xr.Dataset(coords={"chain": [0, 1]}), **groups})
    write_idata(tree, tmp_path / "tree.nc")
    with xr.open_datatree(tmp_path / "tree.nc") as back:
        for name, dataset in groups.items():
            _check(back[name].to_dataset(), dataset)
