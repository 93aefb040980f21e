from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="ItemScores")


@_attrs_define
class ItemScores:
    """One item's outcome under every setting.

    Attributes:
        answer_judged (bool): Whether the item has an answer text (`answer_share` is judged).
        answer_share (list[list[float | None]]): Per setting, per budget: the answer's share in the context.
        first_hit (list[int | None]): Per setting: the rank (from 1) of the first expected result; `null` when none
            came.
        found_by (list[int]): The settings that found it: a hit within rank 5, or the answer fully (80 %) in the
            context at some budget.
        hit_judged (bool): Whether the item names sources or chunks (`first_hit` is judged).
        index (int): The item's place in the test set.
        latency_ms (list[list[float]]): Per setting, per budget: the retrieval's time in the service.
        query (str):
    """

    answer_judged: bool
    answer_share: list[list[float | None]]
    first_hit: list[int | None]
    found_by: list[int]
    hit_judged: bool
    index: int
    latency_ms: list[list[float]]
    query: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        answer_judged = self.answer_judged

        answer_share = []
        for answer_share_item_data in self.answer_share:
            answer_share_item = []
            for answer_share_item_item_data in answer_share_item_data:
                answer_share_item_item: float | None
                answer_share_item_item = answer_share_item_item_data
                answer_share_item.append(answer_share_item_item)

            answer_share.append(answer_share_item)

        first_hit = []
        for first_hit_item_data in self.first_hit:
            first_hit_item: int | None
            first_hit_item = first_hit_item_data
            first_hit.append(first_hit_item)

        found_by = self.found_by

        hit_judged = self.hit_judged

        index = self.index

        latency_ms = []
        for latency_ms_item_data in self.latency_ms:
            latency_ms_item = latency_ms_item_data

            latency_ms.append(latency_ms_item)

        query = self.query

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "answer_judged": answer_judged,
                "answer_share": answer_share,
                "first_hit": first_hit,
                "found_by": found_by,
                "hit_judged": hit_judged,
                "index": index,
                "latency_ms": latency_ms,
                "query": query,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        answer_judged = d.pop("answer_judged")

        answer_share = []
        _answer_share = d.pop("answer_share")
        for answer_share_item_data in _answer_share:
            answer_share_item = []
            _answer_share_item = answer_share_item_data
            for answer_share_item_item_data in _answer_share_item:

                def _parse_answer_share_item_item(data: object) -> float | None:
                    if data is None:
                        return data
                    return cast(float | None, data)

                answer_share_item_item = _parse_answer_share_item_item(
                    answer_share_item_item_data
                )

                answer_share_item.append(answer_share_item_item)

            answer_share.append(answer_share_item)

        first_hit = []
        _first_hit = d.pop("first_hit")
        for first_hit_item_data in _first_hit:

            def _parse_first_hit_item(data: object) -> int | None:
                if data is None:
                    return data
                return cast(int | None, data)

            first_hit_item = _parse_first_hit_item(first_hit_item_data)

            first_hit.append(first_hit_item)

        found_by = cast(list[int], d.pop("found_by"))

        hit_judged = d.pop("hit_judged")

        index = d.pop("index")

        latency_ms = []
        _latency_ms = d.pop("latency_ms")
        for latency_ms_item_data in _latency_ms:
            latency_ms_item = cast(list[float], latency_ms_item_data)

            latency_ms.append(latency_ms_item)

        query = d.pop("query")

        item_scores = cls(
            answer_judged=answer_judged,
            answer_share=answer_share,
            first_hit=first_hit,
            found_by=found_by,
            hit_judged=hit_judged,
            index=index,
            latency_ms=latency_ms,
            query=query,
        )

        item_scores.additional_properties = d
        return item_scores

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
