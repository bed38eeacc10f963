//! The connections waiting without a request in progress, oldest first: every request's wait is
//! added and then taken out again, and a new connection at the cap takes the oldest.
//!
//! A doubly linked list through a slab, so that adding, taking out and taking the oldest cost the
//! same whatever the number of connections waiting: kept in a `VecDeque`, taking out a wait that
//! is not the newest moved every wait listed after (or before) it, so with thousands of
//! kept-alive connections each request moved thousands of entries. Written here because the list
//! crates either hash their keys (cost on every request for nothing: the slab's index is the key)
//! or cannot take an element out of the middle.

use slab::Slab;

/// Where an entry is, and which entry it was: an index is used again once its entry is taken
/// out, and the number tells the entry that was put there apart from a later one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket {
    index: usize,
    number: u64,
}

struct Node<T> {
    value: T,
    number: u64,
    older: Option<usize>,
    newer: Option<usize>,
}

/// Entries in the order they were added.
pub(crate) struct Waits<T> {
    nodes: Slab<Node<T>>,
    oldest: Option<usize>,
    newest: Option<usize>,
    next_number: u64,
}

impl<T> Default for Waits<T> {
    fn default() -> Self {
        Waits {
            nodes: Slab::new(),
            oldest: None,
            newest: None,
            next_number: 0,
        }
    }
}

impl<T> Waits<T> {
    /// Adds `value` as the newest entry.
    pub(crate) fn push(&mut self, value: T) -> Ticket {
        let number = self.next_number;
        self.next_number += 1;
        let index = self.nodes.insert(Node {
            value,
            number,
            older: self.newest,
            newer: None,
        });
        match self.newest {
            Some(newest) => self.nodes[newest].newer = Some(index),
            None => self.oldest = Some(index),
        }
        self.newest = Some(index);
        Ticket { index, number }
    }

    /// Takes out the entry `ticket` names, if it is still listed.
    pub(crate) fn remove(&mut self, ticket: Ticket) -> Option<T> {
        match self.nodes.get(ticket.index) {
            Some(node) if node.number == ticket.number => Some(self.unlink(ticket.index)),
            _ => None,
        }
    }

    /// Takes out the oldest entry.
    pub(crate) fn pop_oldest(&mut self) -> Option<T> {
        self.oldest.map(|oldest| self.unlink(oldest))
    }

    /// Keeps only the entries for which `keep` is true, in their order.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        let mut at = self.oldest;
        while let Some(index) = at {
            at = self.nodes[index].newer;
            if !keep(&self.nodes[index].value) {
                self.unlink(index);
            }
        }
    }

    /// How many entries are listed.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    fn unlink(&mut self, index: usize) -> T {
        let node = self.nodes.remove(index);
        match node.older {
            Some(older) => self.nodes[older].newer = node.newer,
            None => self.oldest = node.newer,
        }
        match node.newer {
            Some(newer) => self.nodes[newer].older = node.older,
            None => self.newest = node.older,
        }
        node.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(waits: &mut Waits<u32>) -> Vec<u32> {
        std::iter::from_fn(|| waits.pop_oldest()).collect()
    }

    #[test]
    fn entries_leave_oldest_first_whichever_were_taken_out_between() {
        let mut waits = Waits::default();
        let tickets: Vec<Ticket> = (0..8).map(|n| waits.push(n)).collect();
        // The newest, the oldest and two in the middle.
        assert_eq!(waits.remove(tickets[7]), Some(7));
        assert_eq!(waits.remove(tickets[0]), Some(0));
        assert_eq!(waits.remove(tickets[3]), Some(3));
        assert_eq!(waits.remove(tickets[4]), Some(4));
        assert_eq!(waits.len(), 4);
        let later = waits.push(8);
        assert_eq!(waits.pop_oldest(), Some(1));
        assert_eq!(waits.remove(later), Some(8));
        assert_eq!(drain(&mut waits), vec![2, 5, 6]);
        assert_eq!(waits.pop_oldest(), None);
        let alone = waits.push(9);
        assert_eq!(waits.remove(alone), Some(9));
        assert_eq!(waits.len(), 0);
        assert_eq!(waits.pop_oldest(), None);
    }

    #[test]
    fn a_ticket_whose_entry_left_takes_out_nothing_even_once_its_place_is_used_again() {
        let mut waits = Waits::default();
        let first = waits.push(1);
        // Taken as the oldest (an eviction), then its place goes to a newer entry.
        assert_eq!(waits.pop_oldest(), Some(1));
        let second = waits.push(2);
        assert_eq!(waits.remove(first), None);
        assert_eq!(waits.remove(first), None);
        assert_eq!(waits.remove(second), Some(2));
        assert_eq!(waits.remove(second), None);
    }

    #[test]
    fn retain_keeps_the_order_of_what_it_keeps() {
        let mut waits = Waits::default();
        let tickets: Vec<Ticket> = (0..10).map(|n| waits.push(n)).collect();
        waits.retain(|n| n % 3 != 0);
        assert_eq!(waits.remove(tickets[0]), None);
        assert_eq!(waits.remove(tickets[5]), Some(5));
        waits.push(10);
        assert_eq!(drain(&mut waits), vec![1, 2, 4, 7, 8, 10]);
    }

    /// Against a plain ordered list, over a long random-looking sequence of operations.
    #[test]
    fn behaves_as_an_ordered_list_over_many_operations() {
        let mut waits = Waits::default();
        let mut model: Vec<(Ticket, u32)> = Vec::new();
        let mut gone: Vec<Ticket> = Vec::new();
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        for step in 0..20_000u32 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            match state % 5 {
                0 | 1 => {
                    let ticket = waits.push(step);
                    model.push((ticket, step));
                }
                2 if !model.is_empty() => {
                    let at = (state >> 8) as usize % model.len();
                    let (ticket, value) = model.remove(at);
                    assert_eq!(waits.remove(ticket), Some(value));
                    gone.push(ticket);
                }
                3 => {
                    let expected = (!model.is_empty()).then(|| model.remove(0));
                    assert_eq!(waits.pop_oldest(), expected.map(|(_, value)| value));
                    gone.extend(expected.map(|(ticket, _)| ticket));
                }
                _ => {
                    if let Some(ticket) = gone.get((state >> 8) as usize % gone.len().max(1)) {
                        assert_eq!(waits.remove(*ticket), None);
                    }
                }
            }
            assert_eq!(waits.len(), model.len());
        }
        let rest: Vec<u32> = model.iter().map(|(_, value)| *value).collect();
        assert_eq!(drain(&mut waits), rest);
    }
}
